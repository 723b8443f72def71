import type { Knex } from 'knex';

/**
 * Jobs that crash their worker do not loop forever: `max_attempts` bounds the
 * claims of one job (then it fails and its reservation is released), and
 * `retry_at` holds a re-queued job back for its backoff while `run_at` keeps its
 * original place in the queue.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('jobs', (t) => {
    t.integer('max_attempts').notNullable().defaultTo(3);
    t.string('retry_at', 32);
  });
}
