import type { Knex } from 'knex';

/**
 * Remote media providers. `remote_calls` records, per output slot,
 * that a request which may create work at an upstream was sent (`calling`) and
 * the upstream's own job id once known (`created`), before the worker waits on
 * it: a worker killed mid-job resumes by looking that job up, never by creating
 * a second one. `jobs.lane` keeps I/O-bound remote jobs apart from the local,
 * CPU-bound generators: each lane has its own worker concurrency.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('remote_calls', (t) => {
    t.string('task_id', 64).notNullable();
    t.integer('idx').notNullable();
    t.string('provider', 64).notNullable();
    t.string('state', 16).notNullable(); // calling | created
    t.string('upstream_id', 200);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.primary(['task_id', 'idx']);
  });
  await db.schema.alterTable('jobs', (t) => {
    t.string('lane', 16).notNullable().defaultTo('local');
  });
}
