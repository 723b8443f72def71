/**
 * Opens the database (the only module family that imports knex, STYLE habit 1 of
 * the request flow). Embedded SQLite under DATA_DIR by default; `DATABASE_URL`
 * selects a server database (postgres://…) with the same migrations.
 */
import fs from 'node:fs';
import path from 'node:path';
import knex, { type Knex } from 'knex';
import { migrationSource } from './migrations/index.ts';

export type Db = Knex;

export interface DbOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
}

/** Opens a knex instance and brings the schema up to date. */
export async function openDb(options: DbOptions): Promise<Db> {
  const db = options.databaseUrl ? openServerDb(options.databaseUrl) : openSqlite(options.dataDir);
  await db.migrate.latest({ migrationSource });
  return db;
}

function openServerDb(url: string): Db {
  const client = url.startsWith('postgres') ? 'pg' : url.split(':')[0];
  return knex({ client, connection: url, pool: { min: 0, max: 10 } });
}

function openSqlite(dataDir: string): Db {
  fs.mkdirSync(dataDir, { recursive: true });
  return knex({
    client: 'sqlite3',
    connection: { filename: path.join(dataDir, 'gemforge.sqlite') },
    useNullAsDefault: true,
    // One connection per process: SQLite has one writer anyway, and a single
    // connection serializes this process's transactions without SQLITE_BUSY.
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: { run(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) {
        // WAL lets readers in other processes (admin CLI, worker) proceed; busy_timeout
        // makes a second process wait for the write lock instead of failing.
        conn.run('PRAGMA journal_mode = WAL', (e1) => {
          if (e1) return done(e1, conn);
          conn.run('PRAGMA busy_timeout = 10000', (e2) => {
            if (e2) return done(e2, conn);
            conn.run('PRAGMA foreign_keys = ON', (e3) => done(e3, conn));
          });
        });
      },
    },
  });
}

/** True for SQLite, whose single writer makes row locks unnecessary. */
export function isSqlite(db: Db | Knex.Transaction): boolean {
  return db.client.config.client === 'sqlite3';
}

const BUSY = /SQLITE_BUSY|database is locked/;

/**
 * Runs `fn` in a transaction. On SQLite a write from another process can make a
 * transaction fail with SQLITE_BUSY when it upgrades from read to write; the
 * whole transaction is then retried (nothing of it was committed).
 */
export async function inTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await db.transaction(fn);
    } catch (error) {
      if (attempt >= 20 || !(error instanceof Error) || !BUSY.test(error.message)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 40 * (attempt + 1)));
    }
  }
}

/** True when an error is a unique/primary-key violation (SQLite or Postgres). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  return e?.code === '23505' || /SQLITE_CONSTRAINT: (UNIQUE|PRIMARY KEY)/.test(e?.message ?? '');
}
