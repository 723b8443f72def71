/**
 * The durable job queue (STYLE habit 7): a job is a row claimed atomically with
 * a lease. A worker that stops heart-beating loses its lease; its jobs are then
 * recovered according to the provider's declared resume policy.
 * Order is `run_at` then `id`, and a re-queued job keeps its `run_at`: a task a
 * client already sees as `processing` does not go behind the backlog. Its
 * backoff is `retry_at`; `attempts` counts claims up to `max_attempts`.
 * Leases (`locked_at`) and backoffs (`retry_at`) are stamped and judged by one
 * clock, the database's (`LeaseTime`), never a worker machine's own: a worker
 * whose clock runs minutes off neither steals a live lease nor keeps an expired
 * one (issue 27, item 6).
 */
import type { Knex } from 'knex';
import { databaseNow, inTransaction, isSqlite, type Db } from './db.ts';
import { executeLater } from './compiled.ts';

type Conn = Db | Knex.Transaction;

export type JobState = 'queued' | 'running' | 'done' | 'held' | 'failed';

export interface JobRow {
  id: number;
  task_id: string;
  state: JobState;
  attempts: number;
  max_attempts: number;
  run_at: string;
  /** A re-queued job is not claimed before this (its backoff); null for a fresh one. */
  retry_at: string | null;
  locked_at: string | null;
  locked_by: string | null;
  last_error: string | null;
  lane: Lane;
  created_at: string;
  updated_at: string;
}

/** Lease times come from the database's clock. */
export const DATABASE_CLOCK = Symbol('the database clock');

/**
 * The moment leases are stamped and judged at: the database's clock, or an ISO
 * time read from a clock that every worker shares (a test's manual clock).
 */
export type LeaseTime = typeof DATABASE_CLOCK | string;

/** `at` moved by `offsetMs`, as a query value in the stored text format. */
function stamp(db: Conn, at: LeaseTime, offsetMs = 0): string | Knex.Raw {
  return at === DATABASE_CLOCK ? databaseNow(db, offsetMs) : new Date(Date.parse(at) + offsetMs).toISOString();
}

/** Which worker loops run a job: the local CPU-bound generators, or remote providers (I/O-bound, many at once). */
export type Lane = 'local' | 'remote';

export async function enqueue(db: Conn, taskId: string, nowIso: string, lane: Lane = 'local'): Promise<void> {
  await executeLater(
    db,
    'job-enqueue',
    (c, task, now, l) => c('jobs').insert({ task_id: task, state: 'queued', attempts: 0, run_at: now, created_at: now, updated_at: now, lane: l }),
    [taskId, nowIso, lane],
  );
}

/**
 * Claims the next due job for `workerId`: one conditional UPDATE, so two workers
 * (threads or processes) can never both win the same row. `run_at` only orders
 * (it is the submitting API's clock at enqueue, never a future time); a
 * re-queued job waits for its `retry_at`.
 */
export async function claimNext(db: Db, workerId: string, now: LeaseTime, lane: Lane = 'local'): Promise<JobRow | undefined> {
  return inTransaction(db, async (trx) => {
    const at = stamp(trx, now);
    let pick = trx('jobs')
      .where({ state: 'queued', lane })
      .where((q) => q.whereNull('retry_at').orWhere('retry_at', '<=', at))
      .orderBy('run_at')
      .orderBy('id')
      .first('id');
    if (!isSqlite(db)) pick = pick.forUpdate().skipLocked();
    const candidate = (await pick) as { id: number } | undefined;
    if (!candidate) return undefined;
    const n = await trx('jobs')
      .where({ id: candidate.id, state: 'queued' })
      .update({ state: 'running', locked_at: at, locked_by: workerId, updated_at: at, attempts: trx.raw('attempts + 1') });
    if (n !== 1) return undefined;
    return trx('jobs').where({ id: candidate.id }).first();
  });
}

/** Renews the lease; false when the job is no longer this worker's. */
export async function heartbeat(db: Conn, jobId: number, workerId: string, now: LeaseTime): Promise<boolean> {
  return (await db('jobs').where({ id: jobId, locked_by: workerId, state: 'running' }).update({ locked_at: stamp(db, now) })) === 1;
}

/**
 * Whether the job is still this worker's, its row locked until the caller's
 * transaction ends (Postgres), so a write made with this check cannot race a
 * recovery that hands the job to another worker.
 */
export async function stillOurs(trx: Conn, jobId: number, workerId: string): Promise<boolean> {
  let q = trx('jobs').where({ id: jobId, locked_by: workerId, state: 'running' }).first('id');
  if (!isSqlite(trx as Db)) q = q.forUpdate();
  return Boolean(await q);
}

/** Marks this worker's running job done; false when the job is no longer this worker's (its lease was lost). */
export async function finish(db: Conn, jobId: number, workerId: string, nowIso: string): Promise<boolean> {
  const n = await db('jobs').where({ id: jobId, locked_by: workerId, state: 'running' }).update({ state: 'done', locked_at: null, locked_by: null, updated_at: nowIso });
  return n === 1;
}

/**
 * Hands a running job of this worker back to the queue when the worker stops
 * (SIGTERM): at once, in its old place, and without spending one of its
 * attempts (issue 27, item 6). False when it is no longer this worker's.
 */
export async function handBack(db: Conn, jobId: number, workerId: string, nowIso: string): Promise<boolean> {
  const n = await db('jobs')
    .where({ id: jobId, state: 'running', locked_by: workerId })
    .update({ state: 'queued', locked_at: null, locked_by: null, retry_at: null, updated_at: nowIso, attempts: db.raw('attempts - 1'), last_error: 'handed back: its worker stopped' });
  return n === 1;
}

export async function setState(db: Conn, jobId: number, state: JobState, nowIso: string, lastError?: string): Promise<void> {
  await db('jobs')
    .where({ id: jobId })
    .update({ state, locked_at: null, locked_by: null, updated_at: nowIso, ...(lastError !== undefined && { last_error: lastError.slice(0, 2000) }) });
}

/** Running jobs whose lease of `leaseMs` expired at `now` (their worker died or hung). */
export async function expiredLeases(db: Conn, now: LeaseTime, leaseMs: number): Promise<JobRow[]> {
  return db('jobs').where({ state: 'running' }).where('locked_at', '<', stamp(db, now, -leaseMs)).select('*');
}

/** Moves a running job whose lease is (still) expired at `now` out of `running`; false when someone else took it meanwhile. */
async function leaveExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, change: Record<string, string | Knex.Raw>): Promise<boolean> {
  const n = await db('jobs')
    .where({ id: jobId, state: 'running' })
    .where('locked_at', '<', stamp(db, now, -leaseMs))
    .update({ ...change, locked_at: null, locked_by: null, updated_at: stamp(db, now) });
  return n === 1;
}

export async function findJobByTask(db: Conn, taskId: string): Promise<JobRow | undefined> {
  return db('jobs').where({ task_id: taskId }).first();
}

/**
 * Requeues an expired running job unless someone else took it meanwhile. It
 * keeps its `run_at` (its place in the queue) and waits `backoffMs`.
 */
export async function requeueExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, backoffMs: number, lastError: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'queued', retry_at: stamp(db, now, backoffMs), last_error: lastError });
}

/** Fails an expired running job that used all its attempts, unless someone else took it meanwhile. */
export async function failExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, lastError: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'failed', last_error: lastError });
}

/** Holds a running job of this worker for an operator (its outcome at the provider cannot be known); false when it is no longer ours. */
export async function hold(db: Conn, jobId: number, workerId: string, nowIso: string, reason: string): Promise<boolean> {
  const n = await db('jobs')
    .where({ id: jobId, state: 'running', locked_by: workerId })
    .update({ state: 'held', locked_at: null, locked_by: null, updated_at: nowIso, last_error: reason.slice(0, 500) });
  return n === 1;
}

/** Holds an expired running job for an operator, unless someone else took it meanwhile. */
export async function holdExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, reason: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'held', last_error: reason });
}
