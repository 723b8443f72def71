import type { Knex } from 'knex';

/**
 * Media tasks, their outputs, and the durable job queue that runs them. A job is
 * a row with explicit columns (state, attempts, run_at, locked_at, locked_by,
 * last_error), claimed atomically with a lease.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('tasks', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('key_id', 64).notNullable();
    t.string('kind', 8).notNullable(); // image | video | audio
    t.string('model', 150).notNullable();
    t.text('request').notNullable(); // JSON: the normalized generation request
    t.string('status', 16).notNullable(); // queued | processing | succeeded | partial | failed | cancelled
    t.string('reservation_id', 64).notNullable().references('reservations.id');
    t.string('error_code', 64);
    t.string('error_message', 500);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.string('finished_at', 32);
    t.index(['account_id', 'created_at']);
    t.index(['status']);
  });
  await db.schema.createTable('task_outputs', (t) => {
    t.string('task_id', 64).notNullable().references('tasks.id');
    t.integer('idx').notNullable();
    t.string('status', 16).notNullable(); // pending | processing | succeeded | failed | expired
    t.bigInteger('price').notNullable(); // Gems charged if this output succeeds
    t.string('asset_id', 64);
    t.string('error', 500);
    t.primary(['task_id', 'idx']);
  });
  await db.schema.createTable('jobs', (t) => {
    t.increments('id').primary();
    t.string('task_id', 64).notNullable().unique().references('tasks.id');
    t.string('state', 16).notNullable(); // queued | running | done | held
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('run_at', 32).notNullable();
    t.string('locked_at', 32);
    t.string('locked_by', 64);
    t.text('last_error');
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['state', 'run_at']);
  });
}
