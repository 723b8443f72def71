import type { Knex } from 'knex';

/** Accounts and their API keys. Only a SHA-256 hash of each key secret is stored. */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('accounts', (t) => {
    t.string('id', 64).primary();
    t.string('name', 200).notNullable();
    t.string('state', 16).notNullable().defaultTo('active'); // active | blocked | unavailable
    t.bigInteger('llm_allowance').notNullable().defaultTo(0); // Gems per UTC calendar month
    t.boolean('paid_consent').notNullable().defaultTo(false);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
  });
  await db.schema.createTable('api_keys', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('name', 200).notNullable();
    t.string('secret_hash', 64).notNullable().unique();
    t.string('secret_hint', 16).notNullable(); // last characters, to recognise a key in a list
    t.boolean('scope_read').notNullable();
    t.boolean('scope_generate').notNullable();
    t.bigInteger('monthly_cap'); // null: no cap; 0: spending disabled
    t.string('expires_at', 32); // ISO-8601 UTC, null: never
    t.string('revoked_at', 32);
    t.string('created_at', 32).notNullable();
    t.index(['account_id']);
  });
}
