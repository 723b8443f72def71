/**
 * The hot reads' own SQLite connections: authentication's key with its
 * account and a task with its outputs run as statements prepared once, on
 * read-only connections beside knex's single writing one. In WAL mode a reader
 * sees the last commit and never waits for the writer, so task polls do not
 * queue behind submissions, and skipping knex's builder, pool and re-prepare
 * per call is most of what a cached read costs.
 *
 * Reads by one key (a task and its outputs) are also gathered: every such read
 * asked for while the event loop handles one round of I/O goes out as one
 * statement for all of their keys when that round is done (`readByKey`). Under
 * load a round brings many requests, and a trip through the thread pool (queue
 * the work, switch threads, hand rows back, run the callback) cost several times
 * the lookup itself: measured on one core, skipping a task read's trip took a
 * quarter off what a task GET cost. A read alone still goes out in the same
 * round, as one statement.
 *
 * Each read is still written once, as a knex query: its SQL is compiled once
 * per name (parameters stand in as sentinels), prepared, and reused. Where there
 * are no read connections (Postgres, where knex's pool already holds several
 * connections; any transaction, which must see its own writes) the same query
 * runs through knex as before.
 */
import sqlite3 from 'sqlite3';
import type { Knex } from 'knex';
import { cacheStatements, traceStatements } from './statement-cache.ts';
import { asResult, compile, type Build, type Value } from './compiled.ts';
import { closeConnection, openConnection } from './sqlite-connection.ts';

type Conn = Knex | Knex.Transaction;
type Row = Record<string, unknown>;

/** A read compiled once: its SQL and where each binding comes from (a parameter's index, or a fixed value). */
interface Plan {
  sql: string;
  bindings: Array<number | { value: unknown }>;
}

/** Where a gathered read's answer goes. */
interface Waiter {
  resolve(rows: Row[]): void;
  reject(error: unknown): void;
}

/** The reads by key gathered for one plan in this round of the event loop: the waiters of each key. */
interface Gathered {
  plan: Plan;
  waiters: Map<string, Waiter[]>;
  sent: boolean;
}

/** The most keys one gathered statement carries (more start another, which can run on another lane). */
const MAX_KEYS = 32;

/** One read-only connection, and how many reads it has under way. */
interface Lane {
  conn: sqlite3.Database;
  running: number;
}

/**
 * How many read connections a process keeps: the size of libuv's thread pool,
 * where node-sqlite3 runs statements (more could not run at once). A
 * node-sqlite3 statement runs its calls one after another, and the next starts
 * only when the event loop has taken the last one's rows, so with one
 * connection 50 concurrent task reads were a single file through the main
 * thread; with several, reads keep running while the event loop is busy.
 */
const LANES = Math.max(1, Math.min(8, Number(process.env.UV_THREADPOOL_SIZE) || 4));

export class ReadConnection {
  private readonly plans = new Map<string, Plan>();
  private readonly gathering = new Map<Plan, Gathered>();

  private constructor(private readonly lanes: Lane[]) {}

  /** Opens `lanes` read-only connections to `file` (the schema must exist: open it after migrating). */
  static async open(file: string, lanes = LANES): Promise<ReadConnection> {
    const opened: Lane[] = [];
    try {
      for (let i = 0; i < lanes; i++) opened.push({ conn: await openReadOnly(file), running: 0 });
    } catch (error) {
      await Promise.all(opened.map(({ conn }) => closeConnection(conn)));
      throw error;
    }
    return new ReadConnection(opened);
  }

  plan(name: string, make: () => { sql: string; bindings: Plan['bindings'] }): Plan {
    let plan = this.plans.get(name);
    if (!plan) {
      const { sql, bindings } = make();
      plan = { sql, bindings };
      this.plans.set(name, plan);
    }
    return plan;
  }

  /** Runs `plan` on the lane with the fewest reads under way (the first when idle, so the others prepare only under load). */
  all(plan: Plan, params: readonly unknown[]): Promise<Row[]> {
    let i = 0;
    for (let j = 1; j < this.lanes.length && this.lanes[i]!.running > 0; j++) if (this.lanes[j]!.running < this.lanes[i]!.running) i = j;
    const lane = this.lanes[i]!;
    const values = plan.bindings.map((b) => (typeof b === 'number' ? params[b] : b.value));
    lane.running++;
    // Each lane keeps its statements prepared (statement-cache.ts), and fails the calls of one whose preparation failed.
    return new Promise((resolve, reject) =>
      lane.conn.all(plan.sql, values, (error: Error | null, rows: Row[]) => {
        lane.running--;
        if (error) reject(error);
        else resolve(rows);
      }),
    );
  }

  /**
   * The rows of one key of `plan`, a read of every key in one JSON array (its
   * single parameter) whose rows each carry their key in `KEY_COLUMN`: gathered
   * with every other read of the same plan asked for in this round of the event
   * loop, and sent when the round is done (setImmediate), or at once when
   * `MAX_KEYS` have gathered. Rows are shared by the reads of one key: read them,
   * never change them.
   */
  byKey(plan: Plan, key: string): Promise<Row[]> {
    return new Promise((resolve, reject) => {
      let gathered = this.gathering.get(plan);
      if (!gathered) {
        const fresh: Gathered = { plan, waiters: new Map(), sent: false };
        this.gathering.set(plan, fresh);
        setImmediate(() => this.send(fresh));
        gathered = fresh;
      }
      const waiters = gathered.waiters.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else gathered.waiters.set(key, [{ resolve, reject }]);
      if (gathered.waiters.size >= MAX_KEYS) this.send(gathered);
    });
  }

  private send(gathered: Gathered): void {
    if (gathered.sent) return;
    gathered.sent = true;
    if (this.gathering.get(gathered.plan) === gathered) this.gathering.delete(gathered.plan);
    const { waiters } = gathered;
    this.all(gathered.plan, [JSON.stringify([...waiters.keys()])]).then(
      (rows) => {
        const byKey = new Map<string, Row[]>();
        for (const row of rows) {
          const key = String(row[KEY_COLUMN]);
          const own = byKey.get(key);
          if (own) own.push(row);
          else byKey.set(key, [row]);
        }
        for (const [key, each] of waiters) for (const waiter of each) waiter.resolve(byKey.get(key) ?? []);
      },
      (error: unknown) => {
        for (const each of waiters.values()) for (const waiter of each) waiter.reject(error);
      },
    );
  }

  /** Calls `listener` with the SQL of every statement these connections run (sqlite3's trace). */
  onStatement(listener: (sql: string) => void): () => void {
    const offs = this.lanes.map(({ conn }) => traceStatements(conn, listener));
    return () => offs.forEach((off) => off());
  }

  /** Closes the lanes (each finalizes its kept statements first). */
  async close(): Promise<void> {
    this.plans.clear();
    const results = await Promise.allSettled(this.lanes.map(({ conn }) => closeConnection(conn)));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

async function openReadOnly(file: string): Promise<sqlite3.Database> {
  const conn = await openConnection(file, sqlite3.OPEN_READONLY);
  // A reader waits out a checkpoint's brief lock rather than failing.
  await new Promise<void>((resolve, reject) => conn.exec('PRAGMA busy_timeout = 10000', (error) => (error ? reject(error) : resolve()))).catch(
    async (error: unknown) => {
      await closeConnection(conn).catch(() => undefined);
      throw error;
    },
  );
  return cacheStatements(conn);
}

const readers = new WeakMap<Conn, ReadConnection>();

/** Gives a (root, SQLite) knex instance its read connections. */
export function attachReader(db: Knex, reader: ReadConnection): void {
  readers.set(db, reader);
}

/** The read connections of a (root, SQLite) knex instance, if it has them. */
export function readerOf(db: Knex): ReadConnection | undefined {
  return readers.get(db);
}

/** The column a read by key (`readByKey`) adds to every row: the key the row belongs to. */
export const KEY_COLUMN = 'read_key';

/**
 * Runs a read of the rows of one key (`keyColumn` equal to `key`, compared as
 * text; `build` must neither filter on it nor limit its rows): on the read
 * connections, gathered with the other reads of this plan in this round of the
 * event loop into one statement (`ReadConnection.byKey`), else through knex for
 * this key alone. Either way every row carries its key in `KEY_COLUMN`, and
 * rows keep `build`'s order within a key.
 */
export async function readByKey(conn: Conn, name: string, build: (c: Conn) => Knex.QueryBuilder, keyColumn: string, key: string): Promise<Row[]> {
  const reader = readers.get(conn);
  if (!reader)
    return asResult(
      await build(conn)
        .where(keyColumn, key)
        .select({ [KEY_COLUMN]: keyColumn }),
    ).rows;
  const plan = reader.plan(name, () =>
    compile(
      conn,
      (c, keys) =>
        build(c)
          .whereRaw('?? in (select value from json_each(?))', [keyColumn, keys])
          .select({ [KEY_COLUMN]: keyColumn }),
      1,
    ),
  );
  return reader.byKey(plan, key);
}

/**
 * Runs a read: on the read connections as a statement prepared once per `name`
 * when `conn` has them, else through knex. `build` must use its parameters only
 * as values; a `.first()` gives its row as the only one.
 */
export async function readRows(conn: Conn, name: string, build: Build, params: readonly Value[]): Promise<Row[]> {
  const reader = readers.get(conn);
  if (!reader) return asResult(await build(conn, ...params)).rows;
  const plan = reader.plan(name, () => compile(conn, build, params.length));
  return reader.all(plan, params);
}
