/**
 * Which database a test installation uses. A test installation is a data dir:
 * with no TEST_DATABASE_URL (`npm test`) the database is SQLite inside it, as in
 * production's zero-config default. With TEST_DATABASE_URL=postgres://… (`npm run
 * test:postgres`) every data dir gets its own fresh Postgres database, created
 * on first use and named after this process, so tests stay independent and a
 * server restarted on the same data dir (or the admin CLI and `gemforge worker`
 * run beside it) finds the same data.
 */
import knex, { type Knex } from 'knex';
import type { DbOptions } from '../../server/storage/db.ts';

/** The maintenance connection (its role needs CREATEDB); undefined → SQLite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/**
 * Extra CREATE DATABASE options (TEST_DATABASE_CREATE_OPTIONS), e.g. a linguistic
 * collation to prove nothing depends on the server's locale:
 * `TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`.
 */
const CREATE_OPTIONS = process.env.TEST_DATABASE_CREATE_OPTIONS ?? '';

/**
 * Prefix of every database the tests create. `npm run test:postgres` sets one per
 * run (TEST_DB_PREFIX) and drops what is left under it when the run ends.
 */
export const TEST_DB_PREFIX = process.env.TEST_DB_PREFIX || 'gft_';

const databases = new Map<string, Promise<string>>();
let counter = 0;

/** One short-lived connection to the maintenance database (none stays open to hold the process). */
async function maintenance(sql: string): Promise<void> {
  const db: Knex = knex({ client: 'pg', connection: TEST_DATABASE_URL, pool: { min: 0, max: 1 } });
  try {
    await db.raw(sql);
  } finally {
    await db.destroy();
  }
}

/** The URL of `dataDir`'s own Postgres database (created once), or undefined for SQLite. */
export function databaseUrlFor(dataDir: string): Promise<string | undefined> {
  if (!TEST_DATABASE_URL) return Promise.resolve(undefined);
  let url = databases.get(dataDir);
  if (!url) {
    const name = `${TEST_DB_PREFIX}${process.pid}_${counter++}_${Date.now().toString(36)}`;
    url = maintenance(`CREATE DATABASE "${name}" ${CREATE_OPTIONS}`).then(() => {
      const u = new URL(TEST_DATABASE_URL);
      u.pathname = `/${name}`;
      return u.toString();
    });
    databases.set(dataDir, url);
  }
  return url;
}

/** What `openDb` needs to open `dataDir`'s installation. */
export async function dbOptionsFor(dataDir: string): Promise<DbOptions> {
  return { dataDir, databaseUrl: await databaseUrlFor(dataDir) };
}

/** Environment for a server, admin CLI or worker process on `dataDir` (DATA_DIR, and DATABASE_URL under Postgres). */
export async function dbEnvFor(dataDir: string): Promise<{ DATA_DIR: string; DATABASE_URL?: string }> {
  const url = await databaseUrlFor(dataDir);
  return url ? { DATA_DIR: dataDir, DATABASE_URL: url } : { DATA_DIR: dataDir };
}

/** Drops `dataDir`'s database (after every connection to it is closed); nothing under SQLite. */
export async function dropDatabaseFor(dataDir: string): Promise<void> {
  const url = databases.get(dataDir);
  if (!url) return;
  databases.delete(dataDir);
  const name = new URL(await url).pathname.slice(1);
  // FORCE cannot end a session it may not signal (an autovacuum worker runs as the
  // superuser): such a session ends by itself in a moment, so try again.
  for (let attempt = 0; ; attempt++) {
    try {
      await maintenance(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      return;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (attempt >= 50 || (code !== '42501' && code !== '55006')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** Drops every database whose name starts with `prefix` (what a run left behind). */
export async function dropDatabasesWithPrefix(prefix: string): Promise<string[]> {
  if (!TEST_DATABASE_URL || !/^[a-z0-9_]+$/.test(prefix)) throw new Error(`refusing to drop databases with prefix "${prefix}"`);
  const db: Knex = knex({ client: 'pg', connection: TEST_DATABASE_URL, pool: { min: 0, max: 1 } });
  try {
    const { rows } = (await db.raw('SELECT datname FROM pg_database WHERE starts_with(datname, ?)', [prefix])) as { rows: Array<{ datname: string }> };
    for (const { datname } of rows) await db.raw(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    return rows.map((r) => r.datname);
  } finally {
    await db.destroy();
  }
}
