import type { Knex } from 'knex';

/**
 * A job whose output could not be stored (object store or database down, disk
 * full) is handed back with a backoff without spending one of its
 * `max_attempts` (those count crashes): `store_retries` counts these hand-backs,
 * and bounds them (WORKER_STORE_RETRIES) before the slot fails.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('jobs', (t) => {
    t.integer('store_retries').notNullable().defaultTo(0);
  });
}
