import type { Knex } from 'knex';

/**
 * When each API key last authenticated a request (the console lists
 * it): written at most once a minute per key and process, off the request's
 * path (domain/accounts.ts `KeyUses`). Null: never used since this column came.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('api_keys', (t) => {
    t.string('last_used_at', 32);
  });
}
