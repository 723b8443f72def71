import type { Knex } from 'knex';

/**
 * Every row of every table of a SQLite database (but SQLite's and knex's own, and `skip`), each as JSON of its
 * values as `quote()` gives them (which tells 4 from 4.0 and '4'): what tests compare to show two ways of writing
 * make the same rows (test/submit-at-once.test.ts, test/settle-at-once.test.ts).
 */
export async function tableRows(db: Knex, skip: ReadonlySet<string>): Promise<Map<string, string[]>> {
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
