import type { Knex } from 'knex';
import { fillBalances } from '../balances.ts';

/**
 * Running balances beside the append-only ledger (two-phase transfer accounts, as
 * TigerBeetle keeps `debits_pending`/`debits_posted`/`credits_posted`): admission
 * reads them instead of summing an account's whole history. Per account: paid
 * Gems credited, paid and allowance Gems held by open reservations (whatever their
 * month), paid Gems charged; per account and UTC month: the charges posted that
 * month; per key: Gems held; per key and UTC month: Gems charged. The ledger rows
 * stay the source of truth: this migration fills the figures from them, and
 * `admin ledger verify` recomputes every figure and compares.
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
  await fillBalances(db);
}
