/** What the metrics endpoint reads from the database at each scrape (http/metrics.ts). */
import type { Db } from './db.ts';
import { query, statement } from './engine/query.ts';

const tasksByStatus = statement.rows<{ status: string; n: number | string }>('metrics-tasks-by-status', (c) =>
  c('tasks').select('status').count({ n: '*' }).groupBy('status'),
);
const jobsByLane = statement.rows<{ lane: string; state: string; n: number | string }>('metrics-jobs-by-lane', (c) =>
  c('jobs').whereIn('state', ['queued', 'running', 'held']).select('lane', 'state').count({ n: '*' }).groupBy('lane', 'state'),
);
const oldestQueued = statement.first<{ at: string | null }>('metrics-oldest-queued-job', (c) =>
  c('jobs').where({ state: 'queued' }).min({ at: 'run_at' }).first(),
);
const accountsWaiting_ = statement.rows<{ lane: string; n: number | string }>('metrics-accounts-waiting', (c) =>
  c('queue_turns').select('lane').count({ n: '*' }).groupBy('lane'),
);
const reserved = statement.first<{ a: number | string | null; p: number | string | null }>('metrics-reserved-gems', (c) =>
  c('reservations').where({ state: 'held' }).sum({ a: 'hold_allowance', p: 'hold_paid' }).first(),
);

/** How many media tasks are in each status. */
export async function taskCounts(db: Db): Promise<Array<{ status: string; count: number }>> {
  return (await query(db, tasksByStatus)).map((r) => ({ status: r.status, count: Number(r.n) }));
}

/** How many jobs wait, run or are held, by lane. */
export async function jobCounts(db: Db): Promise<Array<{ lane: string; state: string; count: number }>> {
  return (await query(db, jobsByLane)).map((r) => ({ lane: r.lane, state: r.state, count: Number(r.n) }));
}

/** When the oldest queued job was enqueued (its `run_at`); undefined when none waits. */
export async function oldestQueuedRunAt(db: Db): Promise<string | undefined> {
  return (await query(db, oldestQueued))?.at ?? undefined;
}

/** Gems held in open reservations, allowance and paid together. */
export async function reservedGems(db: Db): Promise<number> {
  const row = await query(db, reserved);
  return Number(row?.a ?? 0) + Number(row?.p ?? 0);
}

/** Accounts with jobs queued in each lane (their turn rows, migration 017): how many share the workers. */
export async function accountsWaiting(db: Db): Promise<Array<{ lane: string; count: number }>> {
  return (await query(db, accountsWaiting_)).map((r) => ({ lane: r.lane, count: Number(r.n) }));
}
