/**
 * Opens the database (the only module family that imports knex, so
 * storage stays the one layer that knows the database). Embedded SQLite under DATA_DIR by default; `DATABASE_URL`
 * (postgres://… or postgresql://…) selects Postgres with the same migrations.
 * Both drivers return the same plain rows: whole numbers as JS numbers.
 */
import fs from 'node:fs';
import path from 'node:path';
import knex, { type Knex } from 'knex';
import type sqlite3 from 'sqlite3';
import { migrationSource } from './migrations/index.ts';
import { attachReader, readerOf, ReadConnection } from './engine/reads.ts';
import { cacheStatements, traceStatements } from './engine/statement-cache.ts';
import { Checkpointer, WRITER_AUTOCHECKPOINT_PAGES } from './engine/checkpoint.ts';
import { leanTransaction, SqliteClient } from './engine/knex-adapter.ts';
import { deferringPg } from './engine/pg-deferred.ts';
import { privateDataDir, privateSqliteFiles } from './data-dir.ts';
import { countStoreError, isDatabaseFailure } from './outages.ts';

export type Db = Knex;
/** A transaction: what domain code names instead of importing knex itself. */
export type Tx = Knex.Transaction;

export interface DbOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
  /** SQLite's `synchronous` (config `sqliteSynchronous`); default NORMAL, see openSqlite. */
  sqliteSynchronous?: SqliteSynchronous | undefined;
  /** Where knex's own warnings go (a lost connection, a pool that cannot acquire one): the process's log, as JSON lines. */
  log?: DbLog | undefined;
}

/** The part of the process's logger knex's messages are routed to. */
export interface DbLog {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
  debug(details: object, message: string): void;
}

/**
 * knex's logger, routed to the process's log: knex would print multi-line text
 * with stack traces to the console ("Acquire connection error: …" for every
 * failed connect while the database is down). The first line is the message,
 * the whole text a field.
 */
function knexLog(log: DbLog | undefined): Knex.Config['log'] {
  if (!log) return undefined;
  const as = (level: 'warn' | 'error' | 'debug') => (message: unknown) => {
    const text = typeof message === 'string' ? message : message instanceof Error ? (message.stack ?? message.message) : JSON.stringify(message);
    log[level]({ source: 'knex', detail: text }, `knex: ${text.split('\n')[0]}`);
  };
  return { warn: as('warn'), error: as('error'), deprecate: as('warn'), debug: as('debug') };
}

export type SqliteSynchronous = 'NORMAL' | 'FULL';

/** The embedded database's file under DATA_DIR. */
export const sqliteFile = (dataDir: string) => path.join(dataDir, 'gemforge.sqlite');

/**
 * Opens a knex instance and brings the schema up to date. On SQLite the hot
 * reads also get read-only connections of their own (engine/reads.ts), closed with
 * the knex instance by `db.destroy()`.
 */
export async function openDb(options: DbOptions): Promise<Db> {
  privateDataDir(options.dataDir);
  const db = options.databaseUrl
    ? openPostgres(options.databaseUrl, options.log)
    : openSqlite(options.dataDir, options.sqliteSynchronous ?? 'NORMAL', options.log);
  try {
    await migrate(db, options.dataDir);
    if (isSqlite(db)) {
      const reader = await ReadConnection.open(sqliteFile(options.dataDir));
      const checkpointer = await Checkpointer.open(sqliteFile(options.dataDir)).catch(async (error: unknown) => {
        await reader.close().catch(() => undefined);
        throw error;
      });
      withCompanions(db, reader, checkpointer);
    }
  } catch (error) {
    await db.destroy(); // an open pool would keep a failed admin command or worker alive
    throw error;
  }
  return db;
}

/** Attaches the read connections, and makes `db.destroy()` close them and the checkpoint connection too. */
function withCompanions(db: Db, reader: ReadConnection, checkpointer: Checkpointer): void {
  attachReader(db, reader);
  const destroy = db.destroy.bind(db);
  Object.defineProperty(db, 'destroy', {
    configurable: true,
    value: async (callback?: (error?: unknown) => void) => {
      await checkpointer.close().catch(() => undefined);
      await reader.close().catch(() => undefined); // closing what is already closed is not a failure
      return destroy(callback as never);
    },
  });
}

/** Key of gemforge's migration advisory lock on Postgres (any constant: "gemf"). */
const MIGRATION_LOCK = 0x67656d66;

/**
 * Brings the schema up to date. Processes that start together on a fresh
 * database (the server, `gemforge worker`, an admin command) would race to create
 * knex's own migration tables (two can each insert a lock row, after which knex
 * refuses forever), and knex's lock refuses rather than waits. So migrations are
 * serialized outside knex: on Postgres by an advisory lock, on SQLite by a lock
 * file beside the database. Holding that lock, any knex lock left set is stale
 * (a process killed mid-migration) and is cleared first.
 */
async function migrate(db: Db, dataDir: string): Promise<void> {
  if (!isSqlite(db)) {
    await db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(?)', [MIGRATION_LOCK]);
      await db.migrate.forceFreeMigrationsLock({ migrationSource });
      await db.migrate.latest({ migrationSource }); // on other pool connections, while this one holds the lock
    });
    return;
  }
  await withLockFile(path.join(dataDir, 'gemforge.sqlite.migrate-lock'), async () => {
    await db.migrate.forceFreeMigrationsLock({ migrationSource });
    await db.migrate.latest({ migrationSource });
  });
}

/** Runs `fn` while holding an exclusive lock file (created with O_EXCL; holds the pid, so a dead holder's lock is taken over). */
async function withLockFile<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000;
  let fd: number;
  for (;;) {
    try {
      fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (!holderAlive(file)) {
        fs.rmSync(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${file}: another process has been migrating the database for two minutes; remove the file if it is stale`);
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 100));
    }
  }
  try {
    return await fn();
  } finally {
    fs.closeSync(fd);
    fs.rmSync(file, { force: true });
  }
}

/** Whether the pid in a lock file is a live process (a file still being written counts as alive). */
function holderAlive(file: string): boolean {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(file, 'utf8'));
  } catch {
    return true; // gone already, or unreadable: look again
  }
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pg connection as far as the pool hook needs it. */
interface PgConnection {
  query(config: unknown, values?: unknown, callback?: unknown): unknown;
  setTypeParser(oid: number, parse: (text: string) => unknown): void;
}

/** Postgres type OIDs whose text pg would hand back as strings. */
const INT8 = 20; // bigint columns, COUNT(*)
const NUMERIC = 1700; // SUM() over bigint

/**
 * bigint and numeric arrive from pg as strings (they may exceed 2^53). Every one
 * of ours is a whole number of Gems, bytes or rows, far below that: parse them to
 * numbers like SQLite does, and fail loudly rather than round if one ever is not.
 */
function wholeNumber(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`database value ${text} is not a whole number within ±2^53`);
  return n;
}

function openPostgres(url: string, log: DbLog | undefined): Db {
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new Error('DATABASE_URL must be a Postgres URL (postgres://user:password@host:port/database); unset it for SQLite under DATA_DIR');
  }
  return knex({
    client: 'pg',
    connection: url,
    log: knexLog(log),
    pool: {
      min: 0,
      max: 10,
      afterCreate(conn: PgConnection, done: (err: Error | null, conn: unknown) => void) {
        // Per connection, not pg's global parsers: other pg users in the process keep theirs.
        conn.setTypeParser(INT8, wholeNumber);
        conn.setTypeParser(NUMERIC, wholeNumber);
        done(null, deferringPg(conn)); // writes may wait for the COMMIT (engine/pg-deferred.ts)
      },
    },
  });
}

/**
 * SQLite under DATA_DIR: one writing connection through knex, in WAL mode.
 * `synchronous`: NORMAL by default. In WAL mode that never corrupts the
 * database and loses nothing when a process crashes or is killed (a commit is in
 * the WAL file before it returns); only an operating-system crash or power loss
 * can undo the last commits, because the WAL is synced at checkpoints rather
 * than at every commit. FULL (`SQLITE_SYNCHRONOUS=FULL`) syncs every commit, at
 * the price of one fsync per submission.
 */
/** The writing SQLite connections of each knex instance (one at a time, but the pool may replace it). */
const writers = new WeakMap<Db, sqlite3.Database[]>();

/**
 * Calls `listener` with every statement a database runs (counting round trips):
 * on SQLite each connection's own trace, which also sees statements sent past
 * knex (engine/compiled.ts, engine/reads.ts), reported shortly after they run; on Postgres
 * knex's query event, as every statement goes through knex there. Returns the
 * function that stops listening.
 */
export function onStatement(db: Db, listener: (sql: string) => void): () => void {
  const own = writers.get(db);
  if (!own) {
    const onQuery = (query: { sql: string }) => listener(query.sql);
    db.on('query', onQuery);
    return () => db.off('query', onQuery);
  }
  const stops = own.map((conn) => traceStatements(conn, listener));
  const offReader = readerOf(db)?.onStatement(listener);
  return () => {
    for (const stop of stops) stop();
    offReader?.();
  };
}

function openSqlite(dataDir: string, synchronous: SqliteSynchronous, log: DbLog | undefined): Db {
  privateSqliteFiles(sqliteFile(dataDir));
  const connections: sqlite3.Database[] = [];
  const pragmas = [
    'PRAGMA journal_mode = WAL',
    `PRAGMA synchronous = ${synchronous}`,
    'PRAGMA busy_timeout = 10000',
    'PRAGMA foreign_keys = ON',
    `PRAGMA wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`, // checkpoints run beside the writer (engine/checkpoint.ts)
  ];
  const db = knex({
    client: SqliteClient,
    connection: { filename: sqliteFile(dataDir) },
    useNullAsDefault: true,
    log: knexLog(log),
    // One connection per process: SQLite has one writer anyway, and a single
    // connection serializes this process's transactions without SQLITE_BUSY.
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: sqlite3.Database, done: (err: Error | null, conn: unknown) => void) {
        // WAL lets readers (the read connections, the admin CLI, the worker) proceed
        // beside the writer; busy_timeout makes a second process wait for the write
        // lock instead of failing. Then its statements stay prepared (engine/statement-cache.ts).
        const next = (i: number): void => {
          if (i === pragmas.length) {
            connections.splice(0, connections.length, conn);
            done(null, cacheStatements(conn));
          } else conn.run(pragmas[i], (e) => (e ? done(e, conn) : next(i + 1)));
        };
        next(0);
      },
    },
  });
  writers.set(db, connections);
  return db;
}

/** True for SQLite, whose single writer makes row locks unnecessary (Postgres takes them: `forUpdate()`). */
export function isSqlite(db: Db | Knex.Transaction): boolean {
  return (db.client as { dialect?: string }).dialect === 'sqlite3';
}

/**
 * The database's own clock, `offsetMs` moved, as the ISO text every stored stamp
 * uses (`2026-01-01T00:00:00.000Z`), so it compares with stamps written from
 * JavaScript on either database. Processes on machines whose clocks disagree
 * agree on this one.
 */
export function databaseNow(db: Db | Knex.Transaction, offsetMs = 0): Knex.Raw {
  return databaseNowAt(db, databaseClockOffset(db, offsetMs));
}

/** `databaseNow`'s offset as the value its SQL binds, so a compiled statement can take it as a parameter (`databaseNowAt`). */
export function databaseClockOffset(db: Db | Knex.Transaction, offsetMs: number): string | number {
  if (!Number.isInteger(offsetMs)) throw new RangeError(`databaseNow: offsetMs must be whole milliseconds, got ${offsetMs}`);
  return isSqlite(db) ? `${(offsetMs / 1000).toFixed(3)} seconds` : offsetMs;
}

/** `databaseNow` moved by `offset`, a value from `databaseClockOffset` (or the parameter standing for it). */
export function databaseNowAt(db: Db | Knex.Transaction, offset: string | number): Knex.Raw {
  if (isSqlite(db)) return db.raw(`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)`, [offset]);
  // clock_timestamp(), not now(): the time of this statement, not of its transaction's start.
  return db.raw(`to_char((clock_timestamp() + ?::bigint * interval '1 millisecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`, [offset]);
}

const BUSY = /SQLITE_BUSY|database is locked/;
/** Postgres: serialization_failure, deadlock_detected (the victim was rolled back whole). */
const PG_RETRY = new Set(['40001', '40P01']);

function retryable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return BUSY.test(error.message) || PG_RETRY.has((error as { code?: string }).code ?? '');
}

/**
 * Runs `fn` in a transaction (READ COMMITTED on Postgres: rules that need a
 * stable picture lock rows first, see ledger.ts). On SQLite a write from another
 * process can make a transaction fail with SQLITE_BUSY when it upgrades from read
 * to write; on Postgres a deadlock victim is rolled back. Either way nothing of it
 * was committed, and the whole transaction is retried.
 */
export async function inTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      // Writes still waiting (engine/compiled.ts executeLater) leave with the COMMIT, in one round trip; one
      // that fails there rolls the transaction back and fails it, as it would have at the write.
      // knex's transaction life cycle without its per-transaction knex instance (engine/knex-adapter.ts).
      return await leanTransaction(db, fn);
    } catch (error) {
      if (attempt >= 20 || !retryable(error)) {
        // A connection that could not be had or was lost (a statement's own failure was counted by its name).
        if (isDatabaseFailure(error)) countStoreError('database', 'transaction', error);
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 40 * (attempt + 1)));
    }
  }
}

/** True when an error is a unique/primary-key violation (SQLite or Postgres). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  return e?.code === '23505' || /SQLITE_CONSTRAINT: (UNIQUE|PRIMARY KEY)/.test(e?.message ?? '');
}
