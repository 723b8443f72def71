import type { Knex } from 'knex';

/**
 * Postgres only: `gemforge_guard(ok, what)` fails the statement (SQLSTATE GF001,
 * message `what`) unless `ok` is true. The hold that the database decides as a
 * submission commits (balances.ts `guardHold`) uses it to turn "the balance or
 * the key's cap cannot cover this" into a failed commit, so nothing of the
 * transaction is kept and the caller decides again the long way. SQLite needs
 * none: its single writer already decides under its lock.
 */
export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect === 'sqlite3') return;
  await db.raw(`
    CREATE OR REPLACE FUNCTION gemforge_guard(ok boolean, what text) RETURNS boolean
    LANGUAGE plpgsql AS $$
    BEGIN
      IF ok IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = 'GF001', MESSAGE = what;
      END IF;
      RETURN true;
    END
    $$`);
}
