import type { Knex } from 'knex';

/**
 * Circuit breakers of upstream deployments, shared between processes: one row
 * per catalog model and deployment with the moment its breaker stays open
 * until (null: closed), written by the process whose breaker opened or closed
 * and read by every process (an API's `admit` learns of a separate worker's
 * open breakers here). Timestamps are ISO strings, like the other tables'.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('upstream_breakers', (t) => {
    t.string('model', 128).notNullable();
    t.string('deployment', 64).notNullable();
    t.string('opened_until', 32);
    t.string('updated_at', 32).notNullable();
    t.primary(['model', 'deployment']);
  });
}
