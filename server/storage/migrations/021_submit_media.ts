import type { Knex } from 'knex';

/**
 * SQLite only: a new media submission's writes as one statement (storage/procedures.ts
 * `submitMediaAtOnce`). `INSERT INTO submit_media (…) VALUES (…)` stores nothing in the
 * view; its INSTEAD OF INSERT trigger makes, in the order the step-by-step path makes them
 * (domain/tasks.ts `submitMedia`): the claim of the identity (its record: a claim made
 * before fails on the primary key), the hold's guarded moves of the account's paid balance
 * and the key's pending Gems (the rules of storage/balances.ts `guardHold`: the balance
 * covers it; the key has no cap, or a cap above 0 that its month's spend plus this hold stays
 * within), the reservation and its hold entry, the task, its outputs (a JSON array of the
 * rows, one element each) and its job (whose own triggers make the account's queue turn,
 * migration 017). A refused guard raises what migration 020's guards raise
 * (`gemforge_guard: <what>`), so the caller tells a refusal the same way. Any failure undoes
 * the whole statement: it is its own transaction.
 *
 * The rows' values are the caller's, the same rows the step-by-step path inserts; only the
 * guards' conditions and the moves are written here a second time, and
 * test/submit-at-once.test.ts makes both paths write the same rows.
 *
 * Statement triggers compile once with the statement that fires them: prepared once and
 * bound, the whole submission is compiled once per connection, not once per request.
 */
const RECORD = [
  'key_id',
  'idem_key',
  'account_id',
  'operation',
  'fingerprint',
  'state',
  'ref',
  'reservation_id',
  'response_status',
  'response_body',
  'created_at',
  'updated_at',
];
const RESERVATION = [
  'id',
  'account_id',
  'key_id',
  'purpose',
  'kind',
  'ref',
  'hold_allowance',
  'hold_paid',
  'state',
  'charged',
  'released',
  'month',
  'created_at',
  'settled_at',
];
const ENTRY = ['account_id', 'key_id', 'reservation_id', 'type', 'allowance', 'paid', 'month', 'created_at', 'note'];
const TASK = [
  'id',
  'account_id',
  'key_id',
  'kind',
  'model',
  'request',
  'status',
  'reservation_id',
  'error_code',
  'error_message',
  'created_at',
  'updated_at',
  'finished_at',
];
const OUTPUT = ['task_id', 'idx', 'status', 'price', 'asset_id', 'error'];
const JOB = ['task_id', 'account_id', 'state', 'attempts', 'run_at', 'created_at', 'updated_at', 'lane'];

/** The view's columns of one row: `<prefix>_<column>`. */
const prefixed = (prefix: string, columns: string[]) => columns.map((c) => `${prefix}_${c}`);
/** `INSERT INTO table (columns) VALUES (NEW.<prefix>_<column>, …)`. */
const insertOf = (table: string, prefix: string, columns: string[]) =>
  `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${prefixed(prefix, columns)
    .map((c) => `NEW.${c}`)
    .join(', ')});`;

export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect !== 'sqlite3') return;
  const columns = [
    ...prefixed('record', RECORD),
    ...prefixed('reservation', RESERVATION),
    ...prefixed('entry', ENTRY),
    ...prefixed('task', TASK),
    'outputs',
    ...prefixed('job', JOB),
  ];
  await db.raw(`CREATE VIEW submit_media AS SELECT ${columns.map((c) => `NULL AS ${c}`).join(', ')} WHERE 0`);
  const paid = 'NEW.reservation_hold_paid';
  await db.raw(`
    CREATE TRIGGER submit_media_insert INSTEAD OF INSERT ON submit_media
    BEGIN
      ${insertOf('idempotency_records', 'record', RECORD)}
      UPDATE account_balances SET paid_pending = paid_pending + ${paid}
        WHERE account_id = NEW.reservation_account_id AND credited - paid_pending - paid_posted >= ${paid};
      SELECT RAISE(ABORT, 'gemforge_guard: account balance') WHERE changes() <> 1;
      UPDATE key_balances SET pending = pending + ${paid}
        WHERE key_id = NEW.reservation_key_id AND EXISTS (SELECT 1 FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = NEW.reservation_month
          WHERE k.id = key_balances.key_id AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND key_balances.pending + COALESCE(km.posted, 0) + ${paid} <= k.monthly_cap)));
      SELECT RAISE(ABORT, 'gemforge_guard: key cap') WHERE NEW.reservation_key_id IS NOT NULL AND changes() <> 1;
      ${insertOf('reservations', 'reservation', RESERVATION)}
      ${insertOf('ledger_entries', 'entry', ENTRY)}
      ${insertOf('tasks', 'task', TASK)}
      INSERT INTO task_outputs (${OUTPUT.join(', ')}) SELECT ${OUTPUT.map((c) => `o.value ->> '${c}'`).join(', ')} FROM json_each(NEW.outputs) AS o;
      ${insertOf('jobs', 'job', JOB)}
    END`);
}
