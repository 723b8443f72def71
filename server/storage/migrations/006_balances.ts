import type { Knex } from 'knex';

/**
 * Running balances beside the append-only ledger (two-phase transfer accounts, as
 * TigerBeetle keeps `debits_pending`/`debits_posted`/`credits_posted`): admission
 * reads them instead of summing an account's whole history. Per account: paid
 * Gems credited, paid and allowance Gems held by open reservations (whatever their
 * month), paid Gems charged; per account and UTC month: the charges posted that
 * month; per key: Gems held; per key and UTC month: Gems charged. The ledger rows
 * stay the source of truth: this migration fills the figures from them, and
 * `admin ledger verify` recomputes every figure and compares.
 *
 * Frozen at its version: the fill is this file's own SQL (as storage/balances.ts
 * `fillBalances` computed it when the migration landed), not a call into live
 * code whose meaning could change under an old migration.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('account_balances', (t) => {
    t.string('account_id', 64).primary().references('accounts.id');
    t.bigInteger('credited').notNullable().defaultTo(0);
    t.bigInteger('paid_pending').notNullable().defaultTo(0);
    t.bigInteger('paid_posted').notNullable().defaultTo(0);
    t.bigInteger('allowance_pending').notNullable().defaultTo(0);
  });
  await db.schema.createTable('account_months', (t) => {
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('month', 7).notNullable();
    t.bigInteger('allowance_posted').notNullable().defaultTo(0);
    t.bigInteger('paid_posted').notNullable().defaultTo(0);
    t.primary(['account_id', 'month']);
  });
  await db.schema.createTable('key_balances', (t) => {
    t.string('key_id', 64).primary().references('api_keys.id');
    t.bigInteger('pending').notNullable().defaultTo(0);
  });
  await db.schema.createTable('key_months', (t) => {
    t.string('key_id', 64).notNullable().references('api_keys.id');
    t.string('month', 7).notNullable();
    t.bigInteger('posted').notNullable().defaultTo(0);
    t.primary(['key_id', 'month']);
  });
  await fill(db);
}

/** `SUM` of a column by entry type with signs (hold, post, void, credit). */
const signed = (column: string, [hold, post, voided, credit]: number[]) =>
  `COALESCE(SUM(CASE type WHEN 'hold' THEN ${hold} * ${column} WHEN 'post' THEN ${post} * ${column} WHEN 'void' THEN ${voided} * ${column} WHEN 'credit' THEN ${credit} * ${column} ELSE 0 END), 0)`;
const PENDING = [1, -1, -1, 0];
const POSTED = [0, 1, 0, 0];
const CREDITED = [0, 0, 0, 1];

/** Every running figure from the ledger rows into the empty tables; every account and key gets a balance row. */
export async function fill(db: Knex): Promise<void> {
  await db.raw(`
    INSERT INTO account_balances (account_id, credited, paid_pending, paid_posted, allowance_pending)
    SELECT a.id, COALESCE(f.credited, 0), COALESCE(f.paid_pending, 0), COALESCE(f.paid_posted, 0), COALESCE(f.allowance_pending, 0)
    FROM accounts a LEFT JOIN (
      SELECT account_id, ${signed('paid', CREDITED)} AS credited, ${signed('paid', PENDING)} AS paid_pending,
             ${signed('paid', POSTED)} AS paid_posted, ${signed('allowance', PENDING)} AS allowance_pending
      FROM ledger_entries GROUP BY account_id
    ) f ON f.account_id = a.id`);
  await db.raw(`
    INSERT INTO account_months (account_id, month, allowance_posted, paid_posted)
    SELECT account_id, month, SUM(allowance), SUM(paid) FROM ledger_entries WHERE type = 'post' GROUP BY account_id, month`);
  await db.raw(`
    INSERT INTO key_balances (key_id, pending)
    SELECT k.id, COALESCE(f.pending, 0)
    FROM api_keys k LEFT JOIN (
      SELECT key_id, SUM(CASE type WHEN 'hold' THEN allowance + paid ELSE -(allowance + paid) END) AS pending
      FROM ledger_entries WHERE key_id IS NOT NULL AND type <> 'credit' GROUP BY key_id
    ) f ON f.key_id = k.id`);
  await db.raw(`
    INSERT INTO key_months (key_id, month, posted)
    SELECT key_id, month, SUM(allowance + paid) FROM ledger_entries WHERE type = 'post' AND key_id IS NOT NULL GROUP BY key_id, month`);
}
