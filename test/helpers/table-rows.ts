import type { Knex } from 'knex';
import { isSqlite } from '../../server/storage/db.ts';

/**
 * Every row of every table of the database (but the database's and knex's own, and `skip`), each as JSON of its
 * values, in a form that tells their types apart: on SQLite as `quote()` gives them (which tells 4 from 4.0 and '4',
 * a column there holding any type); on Postgres as `row_to_json` gives them (a column's type is its table's, and
 * JSON tells 4 from '4'). What tests compare to show two ways of writing make the same rows
 * (test/submit-at-once.test.ts, test/settle-at-once.test.ts).
 */
export async function tableRows(db: Knex, skip: ReadonlySet<string>): Promise<Map<string, string[]>> {
  return isSqlite(db) ? sqliteRows(db, skip) : postgresRows(db, skip);
}

async function sqliteRows(db: Knex, skip: ReadonlySet<string>): Promise<Map<string, string[]>> {
  const tables = (await db.raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'knex_%'`)) as Array<{
    name: string;
  }>;
  const all = new Map<string, string[]>();
  for (const { name } of tables) {
    if (skip.has(name)) continue;
    const columns = ((await db.raw(`PRAGMA table_info(${name})`)) as Array<{ name: string }>).map((c) => c.name);
    const quoted = (await db.raw(`SELECT ${columns.map((c) => `quote("${c}") AS "${c}"`).join(', ')} FROM "${name}"`)) as Array<Record<string, string>>;
    all.set(
      name,
      quoted.map((r) => JSON.stringify(r)),
    );
  }
  return all;
}

async function postgresRows(db: Knex, skip: ReadonlySet<string>): Promise<Map<string, string[]>> {
  const tables = (await db.raw(`SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'knex_%'`)) as { rows: Array<{ name: string }> };
  const all = new Map<string, string[]>();
  for (const { name } of tables.rows) {
    if (skip.has(name)) continue;
    const rows = (await db.raw(`SELECT row_to_json(t)::text AS row FROM "${name}" AS t`)) as { rows: Array<{ row: string }> };
    all.set(
      name,
      rows.rows.map((r) => r.row),
    );
  }
  return all;
}
