import type { Knex } from 'knex';

/**
 * SQLite only: a completion's settlement (text, extraction) as one statement
 * (storage/procedures.ts `settleCompletionAtOnce`). `INSERT INTO settle_completion (…)
 * VALUES (…)` stores nothing in the view; its INSTEAD OF INSERT trigger makes, in the order
 * the step-by-step path makes them (domain/spend.ts `billAndRetain`: idempotency.ts
 * `complete`, then ledger.ts `settleTx`): the record's completion with its response, only
 * of a record still pending; the reservation's close, only of one still held; its ledger
 * entries (a JSON array of the rows, one element each); the balances' movement: the
 * account's row, its month and day when something is charged, the key's row when it holds
 * something, its month when something is charged (storage/balances.ts `move`). The two
 * guards raise what migration 020's guards raise (`gemforge_guard: <what>`), so a refusal is
 * told apart as before. Any failure undoes the whole statement: it is its own transaction.
 *
 * Every amount is the caller's (ledger.ts `settlementRows`), the same rows the step-by-step
 * path writes; only the guards' conditions and the upserts are written here a second time,
 * and test/settle-at-once.test.ts makes both paths write the same rows. The response body is
 * a bound value, never SQL text: prepared once, the settlement is compiled once per
 * connection, not once per completion.
 */
const RECORD = ['key_id', 'idem_key', 'state', 'ref', 'response_status', 'response_body', 'updated_at'];
const RESERVATION = ['id', 'state', 'charged', 'released', 'settled_at'];
const ENTRY = ['account_id', 'key_id', 'reservation_id', 'type', 'allowance', 'paid', 'month', 'created_at', 'note'];
const MOVE = ['account_id', 'key_id', 'month', 'day', 'kind', 'paid_pending', 'allowance_pending', 'paid_posted', 'allowance_posted'];

/** The view's columns of one part: `<prefix>_<column>`. */
const prefixed = (prefix: string, columns: string[]) => columns.map((c) => `${prefix}_${c}`);
/** `column = NEW.<prefix>_<column>, …`. */
const setOf = (prefix: string, columns: string[]) => columns.map((c) => `${c} = NEW.${prefix}_${c}`).join(', ');

export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect !== 'sqlite3') return;
  const columns = [...prefixed('record', RECORD), ...prefixed('reservation', RESERVATION), 'entries', ...prefixed('move', MOVE)];
  await db.raw(`CREATE VIEW settle_completion AS SELECT ${columns.map((c) => `NULL AS ${c}`).join(', ')} WHERE 0`);
  const posted = '(NEW.move_allowance_posted <> 0 OR NEW.move_paid_posted <> 0)';
  const pending = 'NEW.move_paid_pending + NEW.move_allowance_pending';
  await db.raw(`
    CREATE TRIGGER settle_completion_insert INSTEAD OF INSERT ON settle_completion
    BEGIN
      UPDATE idempotency_records SET ${setOf('record', RECORD.slice(2))}
        WHERE key_id = NEW.record_key_id AND idem_key = NEW.record_idem_key AND state = 'pending';
      SELECT RAISE(ABORT, 'gemforge_guard: idempotency record moved') WHERE changes() <> 1;
      UPDATE reservations SET ${setOf('reservation', RESERVATION.slice(1))}
        WHERE id = NEW.reservation_id AND state = 'held';
      SELECT RAISE(ABORT, 'gemforge_guard: reservation not held') WHERE changes() <> 1;
      INSERT INTO ledger_entries (${ENTRY.join(', ')}) SELECT ${ENTRY.map((c) => `e.value ->> '${c}'`).join(', ')} FROM json_each(NEW.entries) AS e;
      UPDATE account_balances SET paid_pending = paid_pending + NEW.move_paid_pending, paid_posted = paid_posted + NEW.move_paid_posted,
          allowance_pending = allowance_pending + NEW.move_allowance_pending
        WHERE account_id = NEW.move_account_id;
      INSERT INTO account_months (account_id, month, allowance_posted, paid_posted)
        SELECT NEW.move_account_id, NEW.move_month, NEW.move_allowance_posted, NEW.move_paid_posted WHERE ${posted}
        ON CONFLICT (account_id, month) DO UPDATE SET allowance_posted = account_months.allowance_posted + excluded.allowance_posted,
          paid_posted = account_months.paid_posted + excluded.paid_posted;
      INSERT INTO account_days (account_id, day, kind, posted)
        SELECT NEW.move_account_id, NEW.move_day, NEW.move_kind, NEW.move_allowance_posted + NEW.move_paid_posted WHERE ${posted}
        ON CONFLICT (account_id, day, kind) DO UPDATE SET posted = account_days.posted + excluded.posted;
      UPDATE key_balances SET pending = pending + ${pending}
        WHERE key_id = NEW.move_key_id AND ${pending} <> 0;
      INSERT INTO key_months (key_id, month, posted)
        SELECT NEW.move_key_id, NEW.move_month, NEW.move_allowance_posted + NEW.move_paid_posted WHERE NEW.move_key_id IS NOT NULL AND ${posted}
        ON CONFLICT (key_id, month) DO UPDATE SET posted = key_months.posted + excluded.posted;
    END`);
}
