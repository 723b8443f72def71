import type { Knex } from 'knex';

/**
 * SQLite only: the counterpart of migration 011's `gemforge_guard()` (node-sqlite3
 * registers no user functions). A row inserted into `gemforge_guards` is never
 * stored: its BEFORE INSERT trigger aborts the statement (SQLITE_CONSTRAINT, message
 * `gemforge_guard: <what>`) unless `ok` is 1, and otherwise drops the row
 * (`RAISE(IGNORE)`). A write that waits for its transaction's next statement
 * (engine/query.ts, kind `guarded`) is followed in the same `exec` batch by
 * `INSERT INTO gemforge_guards (ok, what) VALUES (changes() = n, '…')`, so a write
 * that did not change the rows it must (a record no longer pending, a reservation
 * no longer held, a rate bucket with no token) fails the batch, its COMMIT included,
 * with nothing kept; the caller then decides again the step-by-step way, which
 * says what it was.
 */
export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect !== 'sqlite3') return;
  await db.raw(`CREATE TABLE gemforge_guards (ok INTEGER NOT NULL, what TEXT NOT NULL)`);
  await db.raw(`
    CREATE TRIGGER gemforge_guards_check BEFORE INSERT ON gemforge_guards
    BEGIN
      SELECT RAISE(ABORT, 'gemforge_guard: ' || NEW.what) WHERE NEW.ok IS NOT 1;
      SELECT RAISE(IGNORE);
    END`);
}
