import type { Knex } from 'knex';

/**
 * Idempotency records: one row per identity (API key, Idempotency-Key). The
 * primary key is what makes simultaneous claims of one identity collapse to one.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('idempotency_records', (t) => {
    t.string('key_id', 64).notNullable().references('api_keys.id');
    t.string('idem_key', 128).notNullable();
    t.string('account_id', 64).notNullable();
    t.string('operation', 64).notNullable();
    t.string('fingerprint', 64).notNullable();
    t.string('state', 16).notNullable(); // pending | completed | released | uncertain
    t.string('ref', 128); // the durable result (task id, response id)
    t.string('reservation_id', 64);
    t.integer('response_status');
    t.text('response_body');
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.primary(['key_id', 'idem_key']);
    t.index(['state']);
  });
}
