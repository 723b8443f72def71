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
import { databaseClockOffset, databaseNowAt, inTransaction, isSqlite, type Db } from './db.ts';
import { query, statement, type Conn, type Value } from './query.ts';

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
  /** Hand-backs because an output could not be stored (migration 019). */
  store_retries: number;
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

/** `at` moved by `offsetMs`, as a statement's parameter: the database clock's offset, or the ISO time. */
function stamp(db: Conn, at: LeaseTime, offsetMs = 0): Value {
  return at === DATABASE_CLOCK ? databaseClockOffset(db, offsetMs) : new Date(Date.parse(at) + offsetMs).toISOString();
}

/** In a builder: the moment a `stamp` parameter stands for (the SQL differs by clock: its name says which, `clockShape`). */
const moment = (c: Conn, clock: boolean, p: Value): Value | Knex.Raw => (clock ? databaseNowAt(c, p as string | number) : p);
const clockShape = (at: LeaseTime) => (at === DATABASE_CLOCK ? 'clock' : 'at');

/** Which worker loops run a job: the local CPU-bound generators, or remote providers (I/O-bound, many at once). */
export type Lane = 'local' | 'remote';

const jobEnqueue = statement.later('job-enqueue', (c, task, now, l) =>
  c('jobs').insert({ task_id: task, state: 'queued', attempts: 0, run_at: now, created_at: now, updated_at: now, lane: l }),
);

export async function enqueue(db: Conn, taskId: string, nowIso: string, lane: Lane = 'local'): Promise<void> {
  await query(db, jobEnqueue, [taskId, nowIso, lane]);
}

/** The next due job of a lane: skipping rows other workers hold on Postgres. */
const jobPick = (at: LeaseTime) =>
  statement.first<{ id: number }>(`job-pick:${clockShape(at)}`, (c, lane, now) => {
    const q = c('jobs')
      .where({ state: 'queued', lane })
      .where((w) => w.whereNull('retry_at').orWhere('retry_at', '<=', moment(c, at === DATABASE_CLOCK, now)))
      .orderBy('run_at')
      .orderBy('id')
      .first('id');
    return isSqlite(c) ? q : q.forUpdate().skipLocked();
  });
const jobClaim = (at: LeaseTime) =>
  statement.write(`job-claim:${clockShape(at)}`, (c, id, worker, now) => {
    const t = moment(c, at === DATABASE_CLOCK, now);
    return c('jobs').where({ id, state: 'queued' }).update({ state: 'running', locked_at: t, locked_by: worker, updated_at: t, attempts: c.raw('attempts + 1') });
  });
const jobById = statement.first<JobRow>('job-by-id', (c, id) => c('jobs').where({ id }).first());

/**
 * Claims the next due job for `workerId`: one conditional UPDATE, so two workers
 * (threads or processes) can never both win the same row. `run_at` only orders
 * (it is the submitting API's clock at enqueue, never a future time); a
 * re-queued job waits for its `retry_at`.
 */
export async function claimNext(db: Db, workerId: string, now: LeaseTime, lane: Lane = 'local'): Promise<JobRow | undefined> {
  return inTransaction(db, async (trx) => {
    const at = stamp(trx, now);
    const candidate = await query(trx, jobPick(now), [lane, at]);
    if (!candidate) return undefined;
    if ((await query(trx, jobClaim(now), [candidate.id, workerId, at])).changes !== 1) return undefined;
    return query(trx, jobById, [candidate.id]);
  });
}

const jobHeartbeat = (at: LeaseTime) =>
  statement.write(`job-heartbeat:${clockShape(at)}`, (c, id, worker, now) =>
    c('jobs').where({ id, locked_by: worker, state: 'running' }).update({ locked_at: moment(c, at === DATABASE_CLOCK, now) }),
  );

/** Renews the lease; false when the job is no longer this worker's. */
export async function heartbeat(db: Conn, jobId: number, workerId: string, now: LeaseTime): Promise<boolean> {
  return (await query(db, jobHeartbeat(now), [jobId, workerId, stamp(db, now)])).changes === 1;
}

const jobStillOurs = statement.first('job-still-ours', (c, id, worker) => {
  const q = c('jobs').where({ id, locked_by: worker, state: 'running' }).first('id');
  return isSqlite(c) ? q : q.forUpdate();
});

/**
 * Whether the job is still this worker's, its row locked until the caller's
 * transaction ends (Postgres), so a write made with this check cannot race a
 * recovery that hands the job to another worker.
 */
export async function stillOurs(trx: Conn, jobId: number, workerId: string): Promise<boolean> {
  return Boolean(await query(trx, jobStillOurs, [jobId, workerId]));
}

const jobFinish = statement.write('job-finish', (c, id, worker, now) =>
  c('jobs').where({ id, locked_by: worker, state: 'running' }).update({ state: 'done', locked_at: null, locked_by: null, updated_at: now }),
);

/** Marks this worker's running job done; false when the job is no longer this worker's (its lease was lost). */
export async function finish(db: Conn, jobId: number, workerId: string, nowIso: string): Promise<boolean> {
  return (await query(db, jobFinish, [jobId, workerId, nowIso])).changes === 1;
}

const jobHandBack = statement.write('job-hand-back', (c, id, worker, now) =>
  c('jobs')
    .where({ id, state: 'running', locked_by: worker })
    .update({ state: 'queued', locked_at: null, locked_by: null, retry_at: null, updated_at: now, attempts: c.raw('attempts - 1'), last_error: 'handed back: its worker stopped' }),
);

/**
 * Hands a running job of this worker back to the queue when the worker stops
 * (SIGTERM): at once, in its old place, and without spending one of its
 * attempts (issue 27, item 6). False when it is no longer this worker's.
 */
export async function handBack(db: Conn, jobId: number, workerId: string, nowIso: string): Promise<boolean> {
  return (await query(db, jobHandBack, [jobId, workerId, nowIso])).changes === 1;
}

const jobSetState = statement.write('job-set-state', (c, id, state, now) => c('jobs').where({ id }).update({ state, locked_at: null, locked_by: null, updated_at: now }));
const jobSetStateWithError = statement.write('job-set-state:error', (c, id, state, now, error) =>
  c('jobs').where({ id }).update({ state, locked_at: null, locked_by: null, updated_at: now, last_error: error }),
);

export async function setState(db: Conn, jobId: number, state: JobState, nowIso: string, lastError?: string): Promise<void> {
  if (lastError === undefined) await query(db, jobSetState, [jobId, state, nowIso]);
  else await query(db, jobSetStateWithError, [jobId, state, nowIso, lastError.slice(0, 2000)]);
}

const jobsExpired = (at: LeaseTime) =>
  statement.rows<JobRow>(`jobs-expired-leases:${clockShape(at)}`, (c, before) =>
    c('jobs').where({ state: 'running' }).where('locked_at', '<', moment(c, at === DATABASE_CLOCK, before)).select('*'),
  );

/** Running jobs whose lease of `leaseMs` expired at `now` (their worker died or hung). */
export async function expiredLeases(db: Conn, now: LeaseTime, leaseMs: number): Promise<JobRow[]> {
  return query(db, jobsExpired(now), [stamp(db, now, -leaseMs)]);
}

/** Where an expired job goes: its state and error, and for a retry, its backoff. */
interface Leaving {
  state: JobState;
  last_error: string;
  backoffMs?: number;
}

const jobLeaveExpired = (at: LeaseTime, retry: boolean) =>
  statement.write(`job-leave-expired:${clockShape(at)}:${retry ? 'retry' : 'stop'}`, (c, id, state, error, expiredBefore, now, retryAt) => {
    const clock = at === DATABASE_CLOCK;
    return c('jobs')
      .where({ id, state: 'running' })
      .where('locked_at', '<', moment(c, clock, expiredBefore))
      .update({ state, ...(retry && { retry_at: moment(c, clock, retryAt) }), last_error: error, locked_at: null, locked_by: null, updated_at: moment(c, clock, now) });
  });

/** Moves a running job whose lease is (still) expired at `now` out of `running`; false when someone else took it meanwhile. */
async function leaveExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, change: Leaving): Promise<boolean> {
  const retry = change.backoffMs !== undefined;
  const params = [jobId, change.state, change.last_error, stamp(db, now, -leaseMs), stamp(db, now), ...(retry ? [stamp(db, now, change.backoffMs)] : [])];
  return (await query(db, jobLeaveExpired(now, retry), params)).changes === 1;
}

const jobOfTask = statement.first<JobRow>('job-of-task', (c, task) => c('jobs').where({ task_id: task }).first());

export async function findJobByTask(db: Conn, taskId: string): Promise<JobRow | undefined> {
  return query(db, jobOfTask, [taskId]);
}

/**
 * Requeues an expired running job unless someone else took it meanwhile. It
 * keeps its `run_at` (its place in the queue) and waits `backoffMs`.
 */
export async function requeueExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, backoffMs: number, lastError: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'queued', backoffMs, last_error: lastError });
}

/** Fails an expired running job that used all its attempts, unless someone else took it meanwhile. */
export async function failExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, lastError: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'failed', last_error: lastError });
}

const jobHold = statement.write('job-hold', (c, id, worker, now, reason) =>
  c('jobs').where({ id, state: 'running', locked_by: worker }).update({ state: 'held', locked_at: null, locked_by: null, updated_at: now, last_error: reason }),
);

/** Holds a running job of this worker for an operator (its outcome at the provider cannot be known); false when it is no longer ours. */
export async function hold(db: Conn, jobId: number, workerId: string, nowIso: string, reason: string): Promise<boolean> {
  return (await query(db, jobHold, [jobId, workerId, nowIso, reason.slice(0, 500)])).changes === 1;
}

/** Holds an expired running job for an operator, unless someone else took it meanwhile. */
export async function holdExpired(db: Conn, jobId: number, now: LeaseTime, leaseMs: number, reason: string): Promise<boolean> {
  return leaveExpired(db, jobId, now, leaseMs, { state: 'held', last_error: reason });
}

const jobRetryStore = (at: LeaseTime) =>
  statement.write(`job-retry-store:${clockShape(at)}`, (c, id, worker, now, retryAt, error) => {
    const clock = at === DATABASE_CLOCK;
    return c('jobs')
      .where({ id, state: 'running', locked_by: worker })
      .update({
        state: 'queued',
        locked_at: null,
        locked_by: null,
        retry_at: moment(c, clock, retryAt),
        updated_at: moment(c, clock, now),
        attempts: c.raw('attempts - 1'),
        store_retries: c.raw('store_retries + 1'),
        last_error: error,
      });
  });

/**
 * Hands a running job of this worker back because a store it needs failed (not
 * the generation): queued in its old place after `backoffMs`, without spending
 * one of its attempts, one more store retry counted. False when it is no longer ours.
 */
export async function retryAfterStoreFailure(db: Conn, jobId: number, workerId: string, now: LeaseTime, backoffMs: number, lastError: string): Promise<boolean> {
  return (await query(db, jobRetryStore(now), [jobId, workerId, stamp(db, now), stamp(db, now, backoffMs), lastError.slice(0, 2000)])).changes === 1;
}
