import type { Knex } from 'knex';

/**
 * The Gem ledger, modelled on two-phase transfers: a reservation holds Gems
 * (`hold`), and is later settled once (`post` of the charge plus `void` of the
 * rest) or released (`void` of everything). `credit` rows move an account's paid
 * balance (admin grants and corrections). Entries are append-only; the
 * reservation row is the state machine that guarantees a single settlement.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('reservations', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('key_id', 64).references('api_keys.id');
    t.string('purpose', 16).notNullable(); // media | llm
    t.string('ref', 128); // what it pays for (task id, request id)
    t.bigInteger('hold_allowance').notNullable();
    t.bigInteger('hold_paid').notNullable();
    t.string('state', 16).notNullable(); // held | settled | released
    t.bigInteger('charged').notNullable().defaultTo(0);
    t.bigInteger('released').notNullable().defaultTo(0);
    t.string('month', 7).notNullable();
    t.string('created_at', 32).notNullable();
    t.string('settled_at', 32);
    t.index(['account_id', 'state']);
    t.index(['key_id', 'state']);
  });
  await db.schema.createTable('ledger_entries', (t) => {
    t.increments('id').primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('key_id', 64);
    t.string('reservation_id', 64).references('reservations.id');
    t.string('type', 8).notNullable(); // credit | hold | post | void
    t.bigInteger('allowance').notNullable().defaultTo(0);
    t.bigInteger('paid').notNullable().defaultTo(0);
    t.string('month', 7).notNullable(); // UTC month the movement happened in
    t.string('created_at', 32).notNullable();
    t.string('note', 200);
    t.index(['account_id', 'type', 'month']);
    t.index(['key_id', 'type', 'month']);
    t.index(['reservation_id']);
  });
}
