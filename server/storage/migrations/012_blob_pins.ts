import type { Knex } from 'knex';

/**
 * Blob pins: a writer about to reference a content hash pins
 * it before it puts the bytes, so the expiry sweep cannot delete those bytes
 * between the put (which skips bytes already there) and the referencing row.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('blob_pins', (t) => {
    t.string('token', 36).primary();
    t.string('sha256', 64).notNullable();
    t.string('created_at', 32).notNullable();
    t.index(['sha256']);
  });
}
