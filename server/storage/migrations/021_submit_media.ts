import type { Knex } from 'knex';

/**
 * SQLite only: a new media submission's writes as one statement (storage/procedures.ts
 * `submitMediaAtOnce`). `INSERT INTO submit_media (…) VALUES (…)` stores nothing in the
 * view; its INSTEAD OF INSERT trigger makes, in the order the step-by-step path makes them
 * (domain/tasks.ts `submitMedia`): the claim of the identity (its record: a claim made
 * before fails on the primary key), the hold's guarded moves of the account's paid balance
 * and the key's pending Gems (the rules of storage/balances.ts `guardHold`: the balance
 * covers it; the key has no cap, or a cap above 0 that its month's spend plus this hold stays
 * within), the reservation and its hold entry, the task, its outputs (a JSON array, one
 * element each) and its job (whose own triggers make the account's queue turn,
 * migration 017). A refused guard raises what migration 020's guards raise
 * (`gemforge_guard: <what>`), so the caller tells a refusal the same way. Any failure undoes
 * the whole statement: it is its own transaction.
 *
 * The rows' values are the caller's, from the same rows the step-by-step path inserts
 * (storage/procedures.ts binds each value the rows share once, checking that they do); only
 * the guards' conditions and the moves are written here a second time, and
 * test/submit-at-once.test.ts makes both paths write the same rows.
 *
 * Statement triggers compile once with the statement that fires them: prepared once and
 * bound, the whole submission is compiled once per connection, not once per request.
 */
/**
 * Each table's columns, and the view's column its value comes from. A value several rows
 * hold (the account, the key, the reservation's and the task's ids, a stamp, the month, the
 * amount) is one column of the view, bound once: node-sqlite3 converts and binds every
 * value on its own (~1 µs each), and the rows repeat these 22 times.
 */
const RECORD: Array<[string, string]> = [
  ['key_id', 'key_id'],
  ['idem_key', 'record_idem_key'],
  ['account_id', 'account_id'],
  ['operation', 'record_operation'],
  ['fingerprint', 'record_fingerprint'],
  ['state', 'record_state'],
  ['ref', 'task_id'],
  ['reservation_id', 'reservation_id'],
  ['response_status', 'record_response_status'],
  ['response_body', 'record_response_body'],
  ['created_at', 'claimed_at'],
  ['updated_at', 'claimed_at'],
];
const RESERVATION: Array<[string, string]> = [
  ['id', 'reservation_id'],
  ['account_id', 'account_id'],
  ['key_id', 'key_id'],
  ['purpose', 'reservation_purpose'],
  ['kind', 'reservation_kind'],
  ['ref', 'reservation_ref'],
  ['hold_allowance', 'hold_allowance'],
  ['hold_paid', 'hold_paid'],
  ['state', 'reservation_state'],
  ['charged', 'reservation_charged'],
  ['released', 'reservation_released'],
  ['month', 'month'],
  ['created_at', 'held_at'],
  ['settled_at', 'reservation_settled_at'],
];
const ENTRY: Array<[string, string]> = [
  ['account_id', 'account_id'],
  ['key_id', 'key_id'],
  ['reservation_id', 'reservation_id'],
  ['type', 'entry_type'],
  ['allowance', 'hold_allowance'],
  ['paid', 'hold_paid'],
  ['month', 'month'],
  ['created_at', 'held_at'],
  ['note', 'entry_note'],
];
const TASK: Array<[string, string]> = [
  ['id', 'task_id'],
  ['account_id', 'account_id'],
  ['key_id', 'key_id'],
  ['kind', 'task_kind'],
  ['model', 'task_model'],
  ['request', 'task_request'],
  ['status', 'task_status'],
  ['reservation_id', 'reservation_id'],
  ['error_code', 'task_error_code'],
  ['error_message', 'task_error_message'],
  ['created_at', 'created_at'],
  ['updated_at', 'created_at'],
  ['finished_at', 'task_finished_at'],
];
/** An output's columns, each from its element of the view's `outputs` (a JSON array), its task the task's. */
const OUTPUT = ['idx', 'status', 'price', 'asset_id', 'error'];
const JOB: Array<[string, string]> = [
  ['task_id', 'task_id'],
  ['account_id', 'account_id'],
  ['state', 'job_state'],
  ['attempts', 'job_attempts'],
  ['run_at', 'created_at'],
  ['created_at', 'created_at'],
  ['updated_at', 'created_at'],
  ['lane', 'job_lane'],
];

/** `INSERT INTO table (columns) VALUES (NEW.<source>, …)`. */
const insertOf = (table: string, columns: Array<[string, string]>) =>
  `INSERT INTO ${table} (${columns.map(([c]) => c).join(', ')}) VALUES (${columns.map(([, from]) => `NEW.${from}`).join(', ')});`;

export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect !== 'sqlite3') return;
  const columns = [...new Set([RECORD, RESERVATION, ENTRY, TASK, JOB].flatMap((table) => table.map(([, from]) => from))), 'outputs'];
  await db.raw(`CREATE VIEW submit_media AS SELECT ${columns.map((c) => `NULL AS ${c}`).join(', ')} WHERE 0`);
  const paid = 'NEW.hold_paid';
  await db.raw(`
    CREATE TRIGGER submit_media_insert INSTEAD OF INSERT ON submit_media
    BEGIN
      ${insertOf('idempotency_records', RECORD)}
      UPDATE account_balances SET paid_pending = paid_pending + ${paid}
        WHERE account_id = NEW.account_id AND credited - paid_pending - paid_posted >= ${paid};
      SELECT RAISE(ABORT, 'gemforge_guard: account balance') WHERE changes() <> 1;
      UPDATE key_balances SET pending = pending + ${paid}
        WHERE key_id = NEW.key_id AND EXISTS (SELECT 1 FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = NEW.month
          WHERE k.id = key_balances.key_id AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND key_balances.pending + COALESCE(km.posted, 0) + ${paid} <= k.monthly_cap)));
      SELECT RAISE(ABORT, 'gemforge_guard: key cap') WHERE NEW.key_id IS NOT NULL AND changes() <> 1;
      ${insertOf('reservations', RESERVATION)}
      ${insertOf('ledger_entries', ENTRY)}
      ${insertOf('tasks', TASK)}
      INSERT INTO task_outputs (task_id, ${OUTPUT.join(', ')}) SELECT NEW.task_id, ${OUTPUT.map((c) => `o.value ->> '${c}'`).join(', ')} FROM json_each(NEW.outputs) AS o;
      ${insertOf('jobs', JOB)}
    END`);
}
