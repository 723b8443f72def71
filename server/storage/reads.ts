/**
 * The hot reads' own SQLite connection (issue 13): authentication's key with its
 * account and a task with its outputs run as statements prepared once, on a
 * read-only connection beside knex's single writing one. In WAL mode a reader
 * sees the last commit and never waits for the writer, so task polls do not
 * queue behind submissions, and skipping knex's builder, pool and re-prepare
 * per call is most of what a cached read costs.
 *
 * Each read is still written once, as a knex query: its SQL is compiled once
 * per name (parameters stand in as sentinels), prepared, and reused. Where there
 * is no read connection (Postgres, where knex's pool already holds several
 * connections; any transaction, which must see its own writes) the same query
 * runs through knex as before.
 */
import sqlite3 from 'sqlite3';
import type { Knex } from 'knex';
import { traceStatements } from './statement-cache.ts';
import { compile, type Build } from './compiled.ts';

type Conn = Knex | Knex.Transaction;
type Row = Record<string, unknown>;

/** A prepared statement, and where each of its bindings comes from: a parameter's index, or a fixed value. */
interface Plan {
  statement: sqlite3.Statement;
  bindings: Array<number | { value: unknown }>;
}

export class ReadConnection {
  private readonly plans = new Map<string, Plan>();

  private constructor(private readonly conn: sqlite3.Database) {}

  /** Opens `file` read-only (the schema must exist: open it after migrating). */
  static async open(file: string): Promise<ReadConnection> {
    const conn = await new Promise<sqlite3.Database>((resolve, reject) => {
      const c = new sqlite3.Database(file, sqlite3.OPEN_READONLY, (error) => (error ? reject(error) : resolve(c)));
    });
    // A reader waits out a checkpoint's brief lock rather than failing.
    await new Promise<void>((resolve, reject) => conn.exec('PRAGMA busy_timeout = 10000', (error) => (error ? reject(error) : resolve())));
    return new ReadConnection(conn);
  }

  plan(name: string, make: () => { sql: string; bindings: Plan['bindings'] }): Plan {
    let plan = this.plans.get(name);
    if (!plan) {
      const { sql, bindings } = make();
      plan = { statement: this.conn.prepare(sql), bindings };
      this.plans.set(name, plan);
    }
    return plan;
  }

  all(plan: Plan, params: readonly unknown[]): Promise<Row[]> {
    const values = plan.bindings.map((b) => (typeof b === 'number' ? params[b] : b.value));
    return new Promise((resolve, reject) => plan.statement.all(values, (error: Error | null, rows: Row[]) => (error ? reject(error) : resolve(rows))));
  }

  /** Calls `listener` with the SQL of every statement this connection runs (sqlite3's trace). */
  onStatement(listener: (sql: string) => void): () => void {
    return traceStatements(this.conn, listener);
  }

  async close(): Promise<void> {
    for (const { statement } of this.plans.values()) await new Promise((resolve) => statement.finalize(() => resolve(undefined)));
    this.plans.clear();
    await new Promise<void>((resolve, reject) => this.conn.close((error) => (error ? reject(error) : resolve())));
  }
}

const readers = new WeakMap<Conn, ReadConnection>();

/** Gives a (root, SQLite) knex instance its read connection. */
export function attachReader(db: Knex, reader: ReadConnection): void {
  readers.set(db, reader);
}

/** The read connection of a (root, SQLite) knex instance, if it has one. */
export function readerOf(db: Knex): ReadConnection | undefined {
  return readers.get(db);
}

/**
 * Runs a read: on the read connection as a statement prepared once per `name`
 * when `conn` has one, else through knex. `build` must use only its string
 * parameters as values and return rows (no `.first()`: take `[0]`).
 */
export async function readRows(conn: Conn, name: string, build: (c: Conn, ...params: string[]) => Knex.QueryBuilder, params: string[]): Promise<Row[]> {
  const reader = readers.get(conn);
  if (!reader) return (await build(conn, ...params)) as Row[];
  const plan = reader.plan(name, () => compile(conn, build as Build, params.length));
  return reader.all(plan, params);
}
