/**
 * What was asked of a remote media provider for one output slot (issue 26,
 * migration 009): `calling` once a request that may create work upstream is
 * about to be sent, `created` with the upstream's job id once it answered, so
 * that a resumed job looks its work up instead of creating it again.
 */
import type { Db } from './db.ts';

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

export async function findRemoteCall(db: Db, taskId: string, idx: number): Promise<RemoteCallRow | undefined> {
  return db('remote_calls').where({ task_id: taskId, idx }).first();
}

/** Records that a creating request is about to be sent (kept as it is when one was already recorded). */
export async function markCalling(db: Db, taskId: string, idx: number, provider: string, nowIso: string): Promise<void> {
  await db('remote_calls')
    .insert({ task_id: taskId, idx, provider, state: 'calling', upstream_id: null, created_at: nowIso, updated_at: nowIso })
    .onConflict(['task_id', 'idx'])
    .merge({ state: 'calling', provider, updated_at: nowIso });
}

export async function markCreated(db: Db, taskId: string, idx: number, upstreamId: string, nowIso: string): Promise<void> {
  await db('remote_calls').where({ task_id: taskId, idx }).update({ state: 'created', upstream_id: upstreamId.slice(0, 200), updated_at: nowIso });
}
