/**
 * Procedures: a use case's writes of several tables as one statement of the
 * database (engine/query.ts kind `procedure`), prepared once per connection and
 * bound with the rows' values: one round trip, its own transaction, and no SQL
 * compiled per request. On SQLite each is an INSERT into a view whose INSTEAD OF
 * INSERT trigger makes the writes; on Postgres a SELECT of a PL/pgSQL function,
 * sent as a named prepared statement (each a migration's). A function answers
 * false, having run nothing, where its database has no such statement.
 *
 * A procedure takes the rows its use case's step-by-step path inserts, built by
 * the same code, so only what the database decides itself (a guard's condition, a
 * balance's move, a rate's token) is written twice; a test makes both paths write
 * the same rows (test/submit-at-once.test.ts). Any failure of a procedure leaves
 * nothing written: its caller then takes the step-by-step path, which answers as it
 * always did (a refusal names its rule, a claim made before is replayed).
 *
 *   submitMediaAtOnce   a new media submission (SQLite migration 021, Postgres
 *                       024): the claim of its identity, the hold with its guards,
 *                       the reservation and its entry, the task, its outputs and
 *                       its job; on Postgres also the admission's tokens
 *   settleCompletionAtOnce  a completion's settlement (SQLite, migration 022): the
 *                       record completed with its response, the reservation closed
 *                       (each with its guard), its entries and the balances' movement
 *   submitTextAtOnce    a chat completion's reservation (SQLite, migration 023): the
 *                       admission's tokens (guarded), the claim, the hold of the
 *                       allowance and paid Gems split as ledger.ts `reserveTx`
 *                       splits them (guarded), the balances' moves and its entry;
 *                       the split comes back as the statement's RETURNING
 */
import { query, rowOf, statement, type Conn, type Value } from './engine/query.ts';
import { isSqlite } from './db.ts';
import type { TokensAtOnce } from './rate-buckets.ts';
import type { IdempotencyRow } from './idempotency.ts';
import { findReservation, type EntryRow, type ReservationRow } from './ledger.ts';
import type { OutputRow, TaskRow } from './tasks.ts';
import type { QueuedJob } from './jobs.ts';
import type { Movement } from './balances.ts';
import type { BucketTake } from './rate-buckets.ts';

/** What a new media submission writes: the rows its step-by-step path inserts. */
export interface MediaSubmissionRows {
  record: IdempotencyRow;
  /** A media hold: paid Gems only (`hold_allowance` 0), as balances.ts `guardHold` holds them. */
  reservation: ReservationRow;
  entry: EntryRow;
  task: TaskRow;
  outputs: OutputRow[];
  job: QueuedJob;
}

/**
 * The view's columns (migration 021): each value the rows share once (node-sqlite3 converts and binds every value
 * on its own, ~1 µs each), then each row's own, then the outputs as one JSON array.
 */
const COLUMNS = [
  'account_id',
  'key_id',
  'reservation_id',
  'task_id',
  'claimed_at',
  'held_at',
  'created_at',
  'month',
  'hold_allowance',
  'hold_paid',
  'record_idem_key',
  'record_operation',
  'record_fingerprint',
  'record_state',
  'record_response_status',
  'record_response_body',
  'reservation_purpose',
  'reservation_kind',
  'reservation_ref',
  'reservation_state',
  'reservation_charged',
  'reservation_released',
  'reservation_settled_at',
  'entry_type',
  'entry_note',
  'task_kind',
  'task_model',
  'task_request',
  'task_status',
  'task_error_code',
  'task_error_message',
  'task_finished_at',
  'job_state',
  'job_attempts',
  'job_lane',
  'outputs',
] as const;

/** Postgres's function (migration 024) takes the same values, then the admission's: its buckets (JSON) and its cap. */
const PG_COLUMNS = [...COLUMNS, 'buckets', 'cap_account_id', 'cap'] as const;

const submitMedia = statement.procedure('submit-media', (c, ...v) =>
  isSqlite(c) ? c('submit_media').insert(rowOf(COLUMNS, v)) : c.raw(`SELECT gemforge_submit_media(${PG_COLUMNS.map(() => '?').join(', ')}) AS made`, v),
);

/** The one value `values` all hold (each is a row's copy of it); rows that disagree are a caller's mistake. */
function shared(what: string, ...values: Value[]): Value {
  if (values.some((v) => v !== values[0])) throw new Error(`submitMediaAtOnce: the rows disagree on the ${what}`);
  return values[0]!;
}

/**
 * Makes a new media submission's writes in one statement. Throws what the step-by-step path's statements would: a
 * unique violation for an identity claimed before, a guard's refusal (engine/query.ts `guardRefusal`: "account
 * balance", "key cap"; "request rate" for `tokens`) for a hold or a take a rule refuses; nothing is written then.
 * `tokens`: the admission's take, made in the same statement as the first attempt's commit would make it
 * (rate-buckets.ts `guardTokens`): Postgres only, where SQLite's admission is always decided apart.
 */
export async function submitMediaAtOnce(db: Conn, rows: MediaSubmissionRows, tokens?: TokensAtOnce): Promise<boolean> {
  const { record, reservation: r, entry, task, outputs, job } = rows;
  if (r.hold_allowance !== 0 || entry.id !== undefined) throw new Error('submitMediaAtOnce: a media hold of paid Gems, its entry without an id');
  const values: Record<(typeof COLUMNS)[number], Value> = {
    account_id: shared('account', record.account_id, r.account_id, entry.account_id, task.account_id, job.account_id),
    key_id: shared('key', record.key_id, r.key_id, entry.key_id, task.key_id),
    reservation_id: shared('reservation', r.id, record.reservation_id, entry.reservation_id, task.reservation_id),
    task_id: shared('task', task.id, record.ref, job.task_id, ...outputs.map((o) => o.task_id)),
    claimed_at: shared('claim time', record.created_at, record.updated_at),
    held_at: shared('hold time', r.created_at, entry.created_at),
    created_at: shared('task time', task.created_at, task.updated_at, job.run_at, job.created_at, job.updated_at),
    month: shared('month', r.month, entry.month),
    hold_allowance: shared('allowance held', r.hold_allowance, entry.allowance),
    hold_paid: shared('paid Gems held', r.hold_paid, entry.paid),
    record_idem_key: record.idem_key,
    record_operation: record.operation,
    record_fingerprint: record.fingerprint,
    record_state: record.state,
    record_response_status: record.response_status,
    record_response_body: record.response_body,
    reservation_purpose: r.purpose,
    reservation_kind: r.kind,
    reservation_ref: r.ref,
    reservation_state: r.state,
    reservation_charged: r.charged,
    reservation_released: r.released,
    reservation_settled_at: r.settled_at,
    entry_type: entry.type,
    entry_note: entry.note,
    task_kind: task.kind,
    task_model: task.model,
    task_request: task.request,
    task_status: task.status,
    task_error_code: task.error_code,
    task_error_message: task.error_message,
    task_finished_at: task.finished_at,
    job_state: job.state,
    job_attempts: job.attempts,
    job_lane: job.lane,
    outputs: JSON.stringify(outputs.map(({ idx, status, price, asset_id, error }) => ({ idx, status, price, asset_id, error }))),
  };
  const params = COLUMNS.map((c) => values[c]);
  if (isSqlite(db)) {
    if (tokens) throw new Error("submitMediaAtOnce: SQLite takes the admission's tokens apart");
    return query(db, submitMedia, params);
  }
  return query(db, submitMedia, [...params, tokens?.buckets ?? '[]', tokens?.capAccountId ?? null, tokens?.cap ?? null]);
}

/** What a completion's settlement writes: the rows and moves its step-by-step path writes (spend.ts `billAndRetain`). */
export interface CompletionSettlementRows {
  /** The record to complete, and its completed columns (idempotency.ts `completion`). */
  record: { key_id: string; idem_key: string } & Pick<IdempotencyRow, 'state' | 'ref' | 'response_status' | 'response_body' | 'updated_at'>;
  /** The held reservation to close, and its closed columns (ledger.ts `settlementRows`). */
  reservation: Pick<ReservationRow, 'id' | 'state' | 'charged' | 'released' | 'settled_at'>;
  entries: EntryRow[];
  /** The balances' movement of a settlement: every figure but `credited`, its day and kind. */
  movement: Movement;
}

/** The view's columns (migration 022), in the order of the parameters below. */
const SETTLE_COLUMNS = [
  'record_key_id',
  'record_idem_key',
  'record_state',
  'record_ref',
  'record_response_status',
  'record_response_body',
  'record_updated_at',
  'reservation_id',
  'reservation_state',
  'reservation_charged',
  'reservation_released',
  'reservation_settled_at',
  'entries',
  'move_account_id',
  'move_key_id',
  'move_month',
  'move_day',
  'move_kind',
  'move_paid_pending',
  'move_allowance_pending',
  'move_paid_posted',
  'move_allowance_posted',
] as const;

const settleCompletion = statement.procedure('settle-completion', (c, ...v) => c('settle_completion').insert(rowOf(SETTLE_COLUMNS, v)));

/**
 * Makes a completion's settlement in one statement (SQLite; false on Postgres, nothing done). Throws what the
 * at-commit path's guards would (engine/query.ts `guardRefusal`: "idempotency record moved", "reservation not
 * held") when the record is no longer pending or the reservation no longer held; nothing is written then.
 */
export async function settleCompletionAtOnce(db: Conn, rows: CompletionSettlementRows): Promise<boolean> {
  if (!isSqlite(db)) return false; // no such statement there (the settlement's batch goes with its COMMIT, engine/pg-deferred.ts)
  const { record, reservation, entries, movement: m } = rows;
  if (entries.some((e) => e.id !== undefined)) throw new Error('settleCompletionAtOnce: entries without ids');
  if (m.credited || !m.day || !m.kind) throw new Error('settleCompletionAtOnce: a settlement moves no credit and names its day and kind');
  const params: Value[] = [
    record.key_id,
    record.idem_key,
    record.state,
    record.ref,
    record.response_status,
    record.response_body,
    record.updated_at,
    reservation.id,
    reservation.state,
    reservation.charged,
    reservation.released,
    reservation.settled_at,
    JSON.stringify(
      entries.map(({ account_id, key_id, reservation_id, type, allowance, paid, month, created_at, note }) => ({
        account_id,
        key_id,
        reservation_id,
        type,
        allowance,
        paid,
        month,
        created_at,
        note,
      })),
    ),
    m.accountId,
    m.keyId,
    m.month,
    m.day,
    m.kind,
    m.paidPending ?? 0,
    m.allowancePending ?? 0,
    m.paidPosted ?? 0,
    m.allowancePosted ?? 0,
  ];
  if (params.length !== SETTLE_COLUMNS.length) throw new Error('settleCompletionAtOnce: a value for each column of the view');
  return query(db, settleCompletion, params);
}

/**
 * What a chat completion's reservation writes: the rows its step-by-step path inserts (text.ts `submit`), but the
 * split of the hold, which the statement decides from the figures as ledger.ts `reserveTx` does.
 */
export interface TextSubmissionRows {
  /** The admission's tokens, one from each bucket (rate-buckets.ts `bucketTakes`); none without rates. */
  buckets: BucketTake[];
  record: IdempotencyRow;
  /** The reservation of an LLM hold; its `hold_allowance` and `hold_paid` are not the caller's (the statement's). */
  reservation: Omit<ReservationRow, 'hold_allowance' | 'hold_paid'>;
  /** Its hold entry; `allowance` and `paid` likewise the statement's. */
  entry: Omit<EntryRow, 'allowance' | 'paid'>;
  /** The whole hold: allowance and paid Gems together. */
  amount: number;
}

/** The view's columns (migration 023): each value the rows share once, then each row's own. */
const TEXT_COLUMNS = [
  'account_id',
  'key_id',
  'reservation_id',
  'completion_id',
  'claimed_at',
  'held_at',
  'month',
  'amount',
  'buckets',
  'record_idem_key',
  'record_operation',
  'record_fingerprint',
  'record_state',
  'record_response_status',
  'record_response_body',
  'reservation_purpose',
  'reservation_kind',
  'reservation_state',
  'reservation_charged',
  'reservation_released',
  'reservation_settled_at',
  'entry_type',
  'entry_note',
] as const;

/** The split the trigger decided, read by the RETURNING's subqueries after it ran. */
type Split = { hold_allowance: unknown; hold_paid: unknown };
const submitText = statement.procedureRows<Split>('submit-text', (c, ...v) =>
  c('submit_text')
    .insert(rowOf(TEXT_COLUMNS, v))
    .returning([
      c.raw('(SELECT r.hold_allowance FROM reservations AS r WHERE r.id = submit_text.reservation_id) AS hold_allowance'),
      c.raw('(SELECT r.hold_paid FROM reservations AS r WHERE r.id = submit_text.reservation_id) AS hold_paid'),
    ]),
);

/**
 * Makes a chat completion's reservation in one statement (SQLite; undefined on Postgres, nothing done): the hold's
 * split, as the statement decided it. Throws what the step-by-step path's statements would: a unique violation for an
 * identity claimed before, a guard's refusal (engine/query.ts `guardRefusal`: "rate bucket without a token", "llm
 * hold", "key cap") for a bucket without a token or a hold a rule refuses; nothing is written then.
 */
export async function submitTextAtOnce(db: Conn, rows: TextSubmissionRows): Promise<{ hold_allowance: number; hold_paid: number } | undefined> {
  const { buckets, record, reservation: r, entry, amount } = rows;
  if (r.purpose !== 'llm' || entry.id !== undefined) throw new Error('submitTextAtOnce: an LLM hold, its entry without an id');
  const values: Record<(typeof TEXT_COLUMNS)[number], Value> = {
    account_id: shared('account', record.account_id, r.account_id, entry.account_id),
    key_id: shared('key', record.key_id, r.key_id, entry.key_id),
    reservation_id: shared('reservation', r.id, record.reservation_id, entry.reservation_id),
    completion_id: shared('completion', record.ref, r.ref),
    claimed_at: shared('claim time', record.created_at, record.updated_at),
    held_at: shared('hold time', r.created_at, entry.created_at),
    month: shared('month', r.month, entry.month),
    amount,
    buckets: JSON.stringify(buckets),
    record_idem_key: record.idem_key,
    record_operation: record.operation,
    record_fingerprint: record.fingerprint,
    record_state: record.state,
    record_response_status: record.response_status,
    record_response_body: record.response_body,
    reservation_purpose: r.purpose,
    reservation_kind: r.kind,
    reservation_state: r.state,
    reservation_charged: r.charged,
    reservation_released: r.released,
    reservation_settled_at: r.settled_at,
    entry_type: entry.type,
    entry_note: entry.note,
  };
  const returned = await query(
    db,
    submitText,
    TEXT_COLUMNS.map((c) => values[c]),
  );
  if (!returned) return undefined;
  // The RETURNING's subqueries run after the trigger (SQLite codes RETURNING as the statement's last trigger). Should
  // they ever not have seen its writes, the statement still made them: the split is then read back, never guessed.
  const split = splitOf(returned[0], amount) ?? splitOf(await findReservation(db, r.id), amount);
  if (!split) throw new Error(`submitTextAtOnce: reservation ${r.id} was made but its split cannot be read`);
  return split;
}

/** A hold's split from a row, when it holds one adding up to `amount`. */
function splitOf(row: Split | undefined, amount: number): { hold_allowance: number; hold_paid: number } | undefined {
  const [allowance, paid] = [Number(row?.hold_allowance), Number(row?.hold_paid)];
  return Number.isSafeInteger(allowance) && Number.isSafeInteger(paid) && allowance + paid === amount
    ? { hold_allowance: allowance, hold_paid: paid }
    : undefined;
}
