/**
 * What was asked of a remote media provider for one output slot (migration
 * 009): `calling` once a request that may create work upstream is
 * about to be sent, `created` with the upstream's job id once it answered, so
 * that a resumed job looks its work up instead of creating it again.
 */
import type { Db } from './db.ts';
import { query, statement } from './engine/query.ts';

export type RemoteCallState = 'calling' | 'created';

export interface RemoteCallRow {
  task_id: string;
  idx: number;
  provider: string;
  state: RemoteCallState;
  upstream_id: string | null;
  created_at: string;
  updated_at: string;
}

const remoteCall = statement.first<RemoteCallRow>('remote-call', (c, task, idx) => c('remote_calls').where({ task_id: task, idx }).first());

export async function findRemoteCall(db: Db, taskId: string, idx: number): Promise<RemoteCallRow | undefined> {
  return query(db, remoteCall, [taskId, idx]);
}

const calling = statement.write('remote-call-calling', (c, task, idx, provider, now) =>
  c('remote_calls')
    .insert({ task_id: task, idx, provider, state: 'calling', upstream_id: null, created_at: now, updated_at: now })
    .onConflict(['task_id', 'idx'])
    .merge({ state: 'calling', provider, updated_at: now }),
);

/** Records that a creating request is about to be sent (kept as it is when one was already recorded). */
export async function markCalling(db: Db, taskId: string, idx: number, provider: string, nowIso: string): Promise<void> {
  await query(db, calling, [taskId, idx, provider, nowIso]);
}

const created = statement.write('remote-call-created', (c, task, idx, upstream, now) =>
  c('remote_calls').where({ task_id: task, idx }).update({ state: 'created', upstream_id: upstream, updated_at: now }),
);

export async function markCreated(db: Db, taskId: string, idx: number, upstreamId: string, nowIso: string): Promise<void> {
  await query(db, created, [taskId, idx, upstreamId.slice(0, 200), nowIso]);
}
