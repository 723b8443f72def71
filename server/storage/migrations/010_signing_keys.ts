import type { Knex } from 'knex';

/**
 * URL-signing keys shared by every instance on the database, so any instance verifies a URL another signed:
 * the newest unretired key signs; keys retired within the URL lifetime still
 * verify, so a rotation never breaks a link before it expires.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('signing_keys', (t) => {
    t.increments('id');
    t.string('secret', 128).notNullable(); // 64 hex characters (32 bytes)
    t.string('created_at', 32).notNullable();
    t.string('retired_at', 32);
  });
}
