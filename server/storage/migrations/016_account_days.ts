import type { Knex } from 'knex';

/**
 * Gems spent per account, UTC day and kind of work, as running figures beside the
 * ledger (the console's usage chart reads 30 days × 5 kinds of rows at most, never
 * the ledger itself).
 *
 * - `reservations.kind`: what a reservation pays for (image, video, audio, text,
 *   extraction), written with it at hold time, so a settlement knows which figure
 *   its charge moves without reading the task or request it paid for.
 * - `account_days`: (account, UTC day, kind) → posted, the Gems charged by that
 *   day's settlements (the `post` entries' allowance + paid), moved in the
 *   settlement's transaction; `admin ledger verify` recomputes it from the post
 *   entries and their reservations' kinds.
 *
 * Frozen at its version: the fills are this file's own SQL. Earlier reservations
 * get their kind from their task (media) or the id they paid for (`ext_…` is an
 * extraction, any other LLM reservation a text completion); a media reservation
 * without a task (a submission whose outcome was lost) counts as an image.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('reservations', (t) => {
    t.string('kind', 16);
  });
  await db.schema.createTable('account_days', (t) => {
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('day', 10).notNullable();
    t.string('kind', 16).notNullable();
    t.bigInteger('posted').notNullable().defaultTo(0);
    t.primary(['account_id', 'day', 'kind']);
  });
  await fill(db);
}

/** Every reservation's kind and every day's figure from the rows already there (into an empty account_days). */
export async function fill(db: Knex): Promise<void> {
  await db.raw(`
    UPDATE reservations SET kind = CASE
      WHEN purpose = 'llm' AND SUBSTR(ref, 1, 4) = 'ext_' THEN 'extraction'
      WHEN purpose = 'llm' THEN 'text'
      ELSE COALESCE((SELECT tasks.kind FROM tasks WHERE tasks.reservation_id = reservations.id), 'image')
    END`);
  await db.raw(`
    INSERT INTO account_days (account_id, day, kind, posted)
    SELECT e.account_id, SUBSTR(e.created_at, 1, 10), r.kind, SUM(e.allowance + e.paid)
    FROM ledger_entries e JOIN reservations r ON r.id = e.reservation_id
    WHERE e.type = 'post'
    GROUP BY e.account_id, SUBSTR(e.created_at, 1, 10), r.kind`);
}
