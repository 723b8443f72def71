/**
 * The durable job queue, so work survives a restart: a job is a row claimed atomically with
 * a lease. A worker that stops heart-beating loses its lease; its jobs are then
 * recovered according to the provider's declared resume policy.
 * Accounts take turns (fair share, migration 017): a claim serves the account
 * of the lane that was served least recently (`queue_turns`), among those with a
 * due job and fewer running jobs than their cap, then that account's oldest due
 * job (`run_at` then `id`). A re-queued job keeps its `run_at`, so within its
 * account a task a client already sees as `processing` does not go behind the
 * backlog. Its backoff is `retry_at`; `attempts` counts claims up to `max_attempts`.
 * A claim reads a few index entries whatever the backlog: the turn rows it skips
 * are those of accounts at their cap or with only jobs in backoff.
 * Leases (`locked_at`) and backoffs (`retry_at`) are stamped and judged by one
 * clock, the database's (`LeaseTime`), never a worker machine's own: a worker
 * whose clock runs minutes off neither steals a live lease nor keeps an expired
 * one, when several instances share the queue.
 */
import type { Knex } from 'knex';
import { databaseClockOffset, databaseNowAt, inTransaction, isSqlite, type Db } from './db.ts';
import { query, rowOf, rowParams, statement, type Conn, type Value } from './engine/query.ts';

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
  /** The task's account (migration 017); the queue takes turns between accounts. */
  account_id: string | null;
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

// `last`: the insert's trigger (migration 017) locks the account's queue_turns row, and a
// transaction that also moves the account's money must take that row after the account's
// balance row, whichever way it holds (balances.ts "Locking"): after the at-commit guards
// and the rate buckets' (rate-buckets.ts `guardTokens`), which are `last` too and queued
// before it, and after `lockFigures` on the long way.
const jobEnqueue = statement.later('job-enqueue', (c, ...v) => c('jobs').insert(rowOf(QUEUED_JOB_COLUMNS, v)), { last: true });

/** The columns a new job is inserted with (the rest keep their defaults). */
export const QUEUED_JOB_COLUMNS = ['task_id', 'account_id', 'state', 'attempts', 'run_at', 'created_at', 'updated_at', 'lane'] as const satisfies ReadonlyArray<
  keyof JobRow
>;
export type QueuedJob = Pick<JobRow, (typeof QUEUED_JOB_COLUMNS)[number]>;

/** The row of a new job of `taskId`, due at once: what `enqueue` inserts (also storage/procedures.ts). */
export function queuedJob(taskId: string, accountId: string, nowIso: string, lane: Lane = 'local'): QueuedJob {
  return { task_id: taskId, account_id: accountId, state: 'queued', attempts: 0, run_at: nowIso, created_at: nowIso, updated_at: nowIso, lane };
}

/** Queues the job of `taskId` (its account's turn row is made by the database, migration 017). */
export async function enqueue(db: Conn, taskId: string, accountId: string, nowIso: string, lane: Lane = 'local'): Promise<void> {
  await insertJob(db, queuedJob(taskId, accountId, nowIso, lane));
}

/** Inserts a new job's row (`queuedJob`). */
export async function insertJob(db: Conn, job: QueuedJob): Promise<void> {
  await query(db, jobEnqueue, rowParams(QUEUED_JOB_COLUMNS, job));
}

/** The cap that is none: more jobs than one account could ever run (an integer column's largest). */
const NO_CAP = 2 ** 31 - 1;

/** Whether a queued job may be claimed at `now` (past its backoff), on table alias `t`. */
const due = (c: Conn, t: string, at: LeaseTime, now: Value) => (w: Knex.QueryBuilder) => {
  w.whereNull(`${t}.retry_at`).orWhere(`${t}.retry_at`, '<=', moment(c, at === DATABASE_CLOCK, now));
};

/**
 * The account of the lane to serve next: the least recently served (lowest
 * `turn`) of those with a due job and fewer running jobs than their cap (the
 * account's own, else `defaultCap`). Postgres skips turn rows another claim (or
 * a submission of that account) holds. Both subqueries are index lookups of one
 * account (jobs_account_lane_state_run); rows are skipped only for accounts at
 * their cap or whose jobs all wait out a backoff.
 */
const turnPick = (lane: Lane, at: LeaseTime) =>
  statement.first<{ account_id: string }>(`turn-pick:${lane}:${clockShape(at)}`, (c, l, now, defaultCap) => {
    const running = c('jobs as r').count('*').whereRaw('r.account_id = t.account_id').whereRaw('r.lane = t.lane').where('r.state', 'running');
    // The account's own cap (0: none), else the configured one.
    const cap = c('accounts as a')
      .select(c.raw(`case when a.${lane}_concurrency = 0 then ${NO_CAP} else a.${lane}_concurrency end`))
      .whereRaw('a.id = t.account_id');
    const dueJob = c('jobs as q')
      .select(c.raw('1'))
      .whereRaw('q.account_id = t.account_id')
      .whereRaw('q.lane = t.lane')
      .where('q.state', 'queued')
      .where(due(c, 'q', at, now));
    const q = c('queue_turns as t')
      .where('t.lane', l)
      .whereRaw('(?) < coalesce((?), ?)', [running, cap, defaultCap])
      .whereExists(dueJob)
      .orderBy('t.turn')
      .orderBy('t.account_id')
      .first('t.account_id');
    return isSqlite(c) ? q : q.forUpdate().skipLocked();
  });

/** The oldest due job of one account in a lane: skipping rows other workers hold on Postgres. */
const jobPick = (at: LeaseTime) =>
  statement.first<{ id: number }>(`job-pick-of-account:${clockShape(at)}`, (c, account, lane, now) => {
    const q = c('jobs as j')
      .where({ 'j.account_id': account, 'j.lane': lane, 'j.state': 'queued' })
      .where(due(c, 'j', at, now))
      .orderBy('j.run_at')
      .orderBy('j.id')
      .first('j.id');
    return isSqlite(c) ? q : q.forUpdate().skipLocked();
  });
const jobClaim = (at: LeaseTime) =>
  statement.write(`job-claim:${clockShape(at)}`, (c, id, worker, now) => {
    const t = moment(c, at === DATABASE_CLOCK, now);
    return c('jobs')
      .where({ id, state: 'queued' })
      .update({ state: 'running', locked_at: t, locked_by: worker, updated_at: t, attempts: c.raw('attempts + 1') });
  });
const jobById = statement.first<JobRow>('job-by-id', (c, id) => c('jobs').where({ id }).first());
/** An account's turn ends with its last queued job of the lane (the claim's trigger counted it down): its row goes (a new job makes it again). */
const turnDone = statement.write('turn-done', (c, lane, account) => c('queue_turns').where({ lane, account_id: account }).where('queued', '<=', 0).delete());
/** Otherwise it goes to the back of the lane's round. */
const turnServed = statement.write('turn-served', (c, lane, account) =>
  c('queue_turns')
    .where({ lane, account_id: account })
    .update({ turn: c.raw('(select coalesce(max(m.turn), 0) + 1 from queue_turns m where m.lane = ?)', [lane]) }),
);

/** Jobs of one account that may run at once in each lane, unless the account says otherwise (`accounts.<lane>_concurrency`). */
export interface AccountCaps {
  local: number;
  remote: number;
}

/** A configured cap of 0: none. */
const capOf = (n: number) => (n > 0 ? n : NO_CAP);

/**
 * Claims the next due job for `workerId`: the account whose turn it is (see
 * the header), then its oldest due job, taken by one conditional UPDATE so two
 * workers (threads or processes) can never both win the same row. `run_at` only
 * orders (it is the submitting API's clock at enqueue, never a future time); a
 * re-queued job waits for its `retry_at`.
 */
export async function claimNext(
  db: Db,
  workerId: string,
  now: LeaseTime,
  lane: Lane = 'local',
  caps: AccountCaps = { local: 0, remote: 0 },
): Promise<JobRow | undefined> {
  return inTransaction(db, async (trx) => {
    const at = stamp(trx, now);
    const turn = await query(trx, turnPick(lane, now), [lane, at, capOf(caps[lane])]);
    if (!turn) return undefined;
    const candidate = await query(trx, jobPick(now), [turn.account_id, lane, at]);
    if (!candidate) return undefined;
    if ((await query(trx, jobClaim(now), [candidate.id, workerId, at])).changes !== 1) return undefined;
    if ((await query(trx, turnDone, [lane, turn.account_id])).changes === 0) await query(trx, turnServed, [lane, turn.account_id]);
    return query(trx, jobById, [candidate.id]);
  });
}

const jobHeartbeat = (at: LeaseTime) =>
  statement.write(`job-heartbeat:${clockShape(at)}`, (c, id, worker, now) =>
    c('jobs')
      .where({ id, locked_by: worker, state: 'running' })
      .update({ locked_at: moment(c, at === DATABASE_CLOCK, now) }),
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
    .update({
      state: 'queued',
      locked_at: null,
      locked_by: null,
      retry_at: null,
      updated_at: now,
      attempts: c.raw('attempts - 1'),
      last_error: 'handed back: its worker stopped',
    }),
);

/**
 * Hands a running job of this worker back to the queue when the worker stops
 * (SIGTERM): at once, in its old place, and without spending one of its
 * attempts. False when it is no longer this worker's.
 */
export async function handBack(db: Conn, jobId: number, workerId: string, nowIso: string): Promise<boolean> {
  return (await query(db, jobHandBack, [jobId, workerId, nowIso])).changes === 1;
}

const jobSetState = statement.write('job-set-state', (c, id, state, now) =>
  c('jobs').where({ id }).update({ state, locked_at: null, locked_by: null, updated_at: now }),
);
const jobSetStateWithError = statement.write('job-set-state:error', (c, id, state, now, error) =>
  c('jobs').where({ id }).update({ state, locked_at: null, locked_by: null, updated_at: now, last_error: error }),
);

export async function setState(db: Conn, jobId: number, state: JobState, nowIso: string, lastError?: string): Promise<void> {
  if (lastError === undefined) await query(db, jobSetState, [jobId, state, nowIso]);
  else await query(db, jobSetStateWithError, [jobId, state, nowIso, lastError.slice(0, 2000)]);
}

const jobsExpired = (at: LeaseTime) =>
  statement.rows<JobRow>(`jobs-expired-leases:${clockShape(at)}`, (c, before) =>
    c('jobs')
      .where({ state: 'running' })
      .where('locked_at', '<', moment(c, at === DATABASE_CLOCK, before))
      .select('*'),
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
      .update({
        state,
        ...(retry && { retry_at: moment(c, clock, retryAt) }),
        last_error: error,
        locked_at: null,
        locked_by: null,
        updated_at: moment(c, clock, now),
      });
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
export async function retryAfterStoreFailure(
  db: Conn,
  jobId: number,
  workerId: string,
  now: LeaseTime,
  backoffMs: number,
  lastError: string,
): Promise<boolean> {
  return (await query(db, jobRetryStore(now), [jobId, workerId, stamp(db, now), stamp(db, now, backoffMs), lastError.slice(0, 2000)])).changes === 1;
}

const queuedOfAccount = statement.first<{ n: number | string | null }>('jobs-queued-of-account', (c, account) =>
  // Its turn rows' counts (migration 017's triggers keep them): two primary-key reads, whatever the backlog.
  c('queue_turns').where({ account_id: account }).whereIn('lane', ['local', 'remote']).sum({ n: 'queued' }).first(),
);

/** The account's queued (not yet claimed) media jobs, both lanes. */
export async function queuedOf(db: Conn, accountId: string): Promise<number> {
  return Number((await query(db, queuedOfAccount, [accountId]))?.n ?? 0);
}

const runningOfAccount = statement.rows<{ lane: Lane; n: number | string }>('jobs-running-of-account', (c, account) =>
  c('jobs').where({ account_id: account, state: 'running' }).whereIn('lane', ['local', 'remote']).select('lane').count({ n: '*' }).groupBy('lane'),
);

/** The account's running jobs by lane (for the operator). */
export async function runningOf(db: Conn, accountId: string): Promise<Record<Lane, number>> {
  const out: Record<Lane, number> = { local: 0, remote: 0 };
  for (const r of await query(db, runningOfAccount, [accountId])) out[r.lane] = Number(r.n);
  return out;
}
