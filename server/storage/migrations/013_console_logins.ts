import type { Knex } from 'knex';

/**
 * The account settings console: account holders' logins, their
 * server-side sessions, and failed sign-in attempts counted per subject (an
 * email's hash or a client address), so an unknown email is limited exactly as
 * a known one and a 429 reveals nothing about which emails have logins.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('console_logins', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('id').inTable('accounts');
    t.string('email', 320).notNullable().unique(); // lower-cased
    t.string('password_hash', 256); // argon2id PHC string; null until an invite is accepted
    t.string('invite_token_hash', 64).unique(); // SHA-256 hex of the one-time invite token
    t.string('invite_expires_at', 32);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['account_id']);
  });
  await db.schema.createTable('console_sessions', (t) => {
    t.string('id', 64).primary(); // SHA-256 hex of the cookie's token: a database read gives no usable cookie
    t.string('login_id', 64).notNullable().references('id').inTable('console_logins');
    t.string('account_id', 64).notNullable();
    t.string('csrf_token', 64).notNullable();
    t.string('created_at', 32).notNullable();
    t.string('last_seen_at', 32).notNullable();
    t.string('idle_expires_at', 32).notNullable();
    t.string('expires_at', 32).notNullable(); // absolute: no activity extends it
    t.string('revoked_at', 32);
    t.index(['login_id']);
  });
  await db.schema.createTable('console_attempts', (t) => {
    t.string('subject', 128).primary(); // "email:<sha256>" or "address:<ip>"
    t.integer('failures').notNullable();
    t.string('window_started_at', 32).notNullable();
  });
}
