/**
 * The spend path's writes, compiled once. A new submission runs about
 * ten statements in one transaction, and through knex each one is built,
 * compiled to SQL and sent through knex's runner again — about two thirds of
 * what a statement costs once SQLite's side is prepared (statement-cache.ts).
 *
 * Each statement is still written once, as a knex query; `execute` compiles it
 * once per `name` with sentinels standing in for its parameters (the way
 * reads.ts does for the read connections) and then, on SQLite inside a
 * transaction, hands the SQL and the real values straight to the transaction's
 * connection, where the statement is prepared once. Everywhere else (Postgres,
 * or outside a transaction) the same query runs through knex as before.
 *
 * `name` must fix the statement's shape: the same name, the same SQL. Callers
 * put into it whatever varies the SQL (a row count, the set of patched columns).
 *
 * A write whose outcome nobody reads can go through `executeLater` instead: on
 * SQLite it waits and leaves with the transaction's other waiting writes in one
 * round trip (a submission's seven writes: one trip instead of seven).
 */
import type { Knex } from 'knex';
import type sqlite3 from 'sqlite3';
import { canDefer, type DeferringConnection } from './statement-cache.ts';
import { canDeferPg, pgLiteral } from './pg-deferred.ts';
import { statementKind } from './knex-adapter.ts';

type Conn = Knex | Knex.Transaction;
export type Row = Record<string, unknown>;
/** A statement's parameter: what a column holds. */
export type Value = string | number | boolean | null;
export type Build = (c: Conn, ...params: Value[]) => Knex.QueryBuilder | Knex.Raw;

/** What a statement gave: its rows (queries and RETURNING), or how many rows it changed (writes). */
export interface Executed {
  rows: Row[];
  changes: number;
}

interface Plan {
  sql: string;
  /** `sql` cut at its placeholders (one more piece than bindings), for writing values in (`executeLater`). */
  pieces: string[];
  /** node-sqlite3's call: `all` returns rows, `run` the changes. */
  method: 'all' | 'run';
  /** Where each binding comes from: a parameter's index, or a value fixed in the query. */
  bindings: Array<number | { value: unknown }>;
  /** Postgres: the name it is prepared under on each connection (pg-deferred.ts). */
  pgName?: string;
}

const plans = new Map<string, Plan>();

const isTransaction = (conn: Conn): conn is Knex.Transaction => (conn as { isTransaction?: boolean }).isTransaction === true;
const onSqlite = (conn: Conn) => (conn.client as { dialect?: string }).dialect === 'sqlite3';

/** Compiles `build` once with sentinels for its `arity` parameters: the SQL, and where each binding comes from (also reads.ts). */
export function compile(conn: Conn, build: Build, arity: number): Plan {
  const sentinels = Array.from({ length: arity }, (_, i) => `\u0000param${i}\u0000`);
  const compiled = build(conn, ...sentinels).toSQL();
  const native = compiled.toNative();
  const { method, returning } = statementKind(compiled);
  const writes = (method === 'insert' || method === 'update' || method === 'del' || method === 'counter') && !returning;
  const used = new Set<number>();
  const bindings = native.bindings.map((value) => {
    const i = sentinels.indexOf(value as string);
    if (i < 0) return { value };
    used.add(i);
    return i;
  });
  // A parameter the builder put into the SQL text instead of a binding would be frozen at its sentinel.
  if (used.size !== arity || sentinels.some((s) => native.sql.includes(s))) throw new Error(`compiled statement: a parameter is not bound as a value`);
  // Cut at knex's own `?` placeholders (SQLite's native SQL is the same; Postgres numbers them $1, $2 … in this order).
  const pieces = placeholderPieces(compiled.sql);
  if (pieces.length !== bindings.length + 1) throw new Error('compiled statement: placeholders and bindings differ');
  return { sql: native.sql, method: writes ? 'run' : 'all', bindings, pieces };
}

/** SQLite SQL cut at its `?` placeholders; `?` inside quotes ('…', "…", `…`, […]) is text. */
function placeholderPieces(sql: string): string[] {
  const pieces: string[] = [];
  let start = 0;
  let close: string | undefined;
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i]!;
    if (close !== undefined) {
      if (ch === close) close = undefined; // a doubled quote closes and reopens: the same
    } else if (ch === "'" || ch === '"' || ch === '`') close = ch;
    else if (ch === '[') close = ']';
    else if (ch === '?') {
      pieces.push(sql.slice(start, i));
      start = i + 1;
    }
  }
  pieces.push(sql.slice(start));
  return pieces;
}

/**
 * A value as an SQLite literal that reads back exactly as the bound value would:
 * text quoted, its quotes doubled (SQLite's only escape), or, when it holds a
 * NUL (which would end the SQL text), as its UTF-8 bytes in hex cast to TEXT;
 * integers as digits. undefined for what has no such literal here (a fraction,
 * whose decimal form SQLite might round differently; anything not a string,
 * whole number, boolean or null). Quoting is the common case: shorter SQL for
 * SQLite to parse than hex, and no encoding on the way.
 */
export function sqliteLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'string') {
    return value.includes('\0') ? `CAST(X'${Buffer.from(value, 'utf8').toString('hex')}' AS TEXT)` : `'${value.replaceAll("'", "''")}'`;
  }
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'boolean') return value ? '1' : '0';
  return undefined;
}

/** The values of `row` in the order of `columns`, and a builder taking them back as that row (for `execute`). */
export function rowParams<K extends string>(columns: readonly K[], row: Partial<Record<K, unknown>>): Value[] {
  return columns.map((c) => (row[c] ?? null) as Value);
}

/** `{ column: params[i] }` over `columns`: a row whose values are `execute`'s parameters. */
export function rowOf<K extends string>(columns: readonly K[], params: readonly Value[], offset = 0): Record<K, Value> {
  return Object.fromEntries(columns.map((c, i) => [c, params[offset + i]])) as Record<K, Value>;
}

/**
 * What knex answered, as rows and changes: a count (UPDATE, DELETE), rows, one
 * row (`.first()`), or a Postgres raw result; insert ids are not rows.
 */
export function asResult(result: unknown): Executed {
  if (typeof result === 'number') return { rows: [], changes: result };
  if (Array.isArray(result)) return { rows: result.filter((r): r is Row => typeof r === 'object' && r !== null), changes: 0 };
  if (result === undefined || result === null) return { rows: [], changes: 0 };
  const pg = result as { rows?: unknown; rowCount?: number | null; command?: unknown };
  if (Array.isArray(pg.rows) && typeof pg.command === 'string') return { rows: pg.rows as Row[], changes: pg.rowCount ?? 0 };
  return { rows: [result as Row], changes: 0 };
}

function planOf(conn: Conn, name: string, build: Build, arity: number): Plan {
  const key = onSqlite(conn) ? name : `pg:${name}`; // one process may hold both kinds of database (tools, tests)
  let plan = plans.get(key);
  if (!plan) {
    plan = compile(conn, build, arity);
    if (!onSqlite(conn)) plan.pgName = `gemforge_${plans.size}`;
    plans.set(key, plan);
  }
  return plan;
}

/**
 * Postgres in a transaction (pg-deferred.ts): the statement's plan, its values,
 * those values as literals and the transaction's connection, or undefined where
 * it runs through knex instead (SQLite, no transaction, a value with no literal).
 */
async function onPgTransaction(conn: Conn, name: string, build: Build, params: readonly Value[]) {
  if (onSqlite(conn) || !isTransaction(conn) || conn.isCompleted()) return undefined;
  const plan = planOf(conn, name, build, params.length);
  const values = valuesOf(plan, params);
  const literals = values.map(pgLiteral);
  const connection: unknown = await conn.client.acquireConnection();
  if (!canDeferPg(connection) || !literals.every((l): l is string => l !== undefined)) return undefined;
  return { plan, values, literals, connection };
}

/**
 * Runs a write whose outcome nobody reads (no rows, no count of changed rows):
 * in a transaction it waits and goes with the other waiting writes in one round
 * trip just before the transaction's next statement, its COMMIT included — on
 * SQLite with its values written into its SQL (`sqliteLiteral`,
 * statement-cache.ts), on Postgres as EXECUTE of a statement prepared on the
 * connection (`pg-deferred.ts`; `last` puts it after the other waiting writes). A failure then fails the transaction as the write itself would
 * have. Anywhere else, or with a value that has no literal, it runs
 * at once like `execute`.
 */
export async function executeLater(conn: Conn, name: string, build: Build, params: readonly Value[], last = false): Promise<void> {
  // Postgres: any statement may wait, its outcome unread; a failure fails the commit.
  const pg = await onPgTransaction(conn, name, build, params);
  if (pg) return pg.connection.deferPrepared(pg.plan.pgName!, pg.plan.sql, pg.literals, last);
  const waiting = await sqliteWaiting(conn, name, build, params);
  if (waiting) return waiting.connection.defer(waiting.sql);
  await execute(conn, name, build, params);
}

/**
 * Runs a write whose only outcome read is whether it failed (no RETURNING rows,
 * no count of changed rows), at once. In a SQLite transaction it goes at the
 * end of the writes that wait, the transaction's held BEGIN included
 * (statement-cache.ts), in their one `exec`: its caller hears its failure as at
 * the write itself, one round trip sooner than a prepared statement after that
 * batch. Anywhere else it runs like `execute` (on Postgres that already goes
 * with what waits).
 */
export async function executeChecked(conn: Conn, name: string, build: Build, params: readonly Value[]): Promise<void> {
  const waiting = await sqliteWaiting(conn, name, build, params);
  if (!waiting) return void (await execute(conn, name, build, params));
  const { connection, sql } = waiting;
  connection.defer(sql);
  await new Promise<void>((resolve, reject) => connection.flushDeferred((error) => (error ? reject(error) : resolve())));
}

/** What Postgres's `gemforge_guard()` (migration 011) and a guarded write's own check fail with. */
const GUARD_REFUSED = 'GF001';
/** A guard of migration 020 (SQLite) refusing: its message names what it guarded. */
const SQLITE_GUARD = /SQLITE_CONSTRAINT: gemforge_guard: (.*)$/;

/** What a refused guard (`executeGuarded`, or Postgres's `gemforge_guard()`) guarded; undefined for any other error. */
export function guardRefusal(error: unknown): string | undefined {
  const e = error as { code?: string; message?: string } | null;
  // knex puts the failed query before Postgres's message (`COMMIT; - key cap`); what a guard says holds no ' - '.
  if (e?.code === GUARD_REFUSED) return e.message?.split(' - ').at(-1);
  return SQLITE_GUARD.exec(e?.message ?? '')?.[1];
}

/**
 * Runs a write that must change exactly `guard.rows` rows. In a SQLite
 * transaction it waits like `executeLater`, followed by the guard of migration
 * 020, which fails the batch it leaves in (the COMMIT's, at the latest) unless
 * `changes()` says the write changed those rows: the transaction then fails
 * with nothing kept, as Postgres's `gemforge_guard()` makes it. Anywhere else
 * (Postgres, no transaction, a value with no literal) it runs at once and is
 * checked there, failing with the same refusal (`guardRefusal` gives `what`).
 * Raw SQL runs through node-sqlite3's `all`, which counts no changes: it may be
 * guarded only where it waits (SQLite, whole values), or it is always refused.
 */
export async function executeGuarded(conn: Conn, name: string, build: Build, params: readonly Value[], guard: { rows: number; what: string }): Promise<void> {
  const waiting = await sqliteWaiting(conn, name, build, params, true);
  if (waiting) {
    waiting.connection.defer(waiting.sql);
    waiting.connection.defer(`INSERT INTO gemforge_guards (ok, what) VALUES (changes() = ${guard.rows}, ${sqliteLiteral(guard.what)})`);
    return;
  }
  const { changes } = await execute(conn, name, build, params);
  if (changes !== guard.rows) throw Object.assign(new Error(guard.what), { code: GUARD_REFUSED });
}

/**
 * A write of a SQLite transaction as complete SQL (values written in) on a connection where writes may wait, or
 * undefined where it cannot be. `unread`: the caller reads none of its rows, so a raw statement (run as `all`) may wait too.
 */
async function sqliteWaiting(
  conn: Conn,
  name: string,
  build: Build,
  params: readonly Value[],
  unread = false,
): Promise<{ connection: DeferringConnection; sql: string } | undefined> {
  if (!onSqlite(conn) || !isTransaction(conn) || conn.isCompleted()) return undefined;
  const plan = planOf(conn, name, build, params.length);
  if (plan.method !== 'run' && !unread) return undefined;
  const literals = valuesOf(plan, params).map(sqliteLiteral);
  const connection = (await conn.client.acquireConnection()) as sqlite3.Database;
  if (!canDefer(connection) || !literals.every((l) => l !== undefined)) return undefined;
  return { connection, sql: plan.pieces.reduce((sql, piece, i) => sql + literals[i - 1] + piece) };
}

/**
 * Runs `build(conn, ...params)`: on SQLite in a transaction as SQL compiled once
 * per `name` on the transaction's own connection, else through knex. `build`
 * must use its parameters only as values.
 */
export async function execute(conn: Conn, name: string, build: Build, params: readonly Value[]): Promise<Executed> {
  const make = build;
  // Postgres: prepared once per connection, sent with what waits (the BEGIN included).
  const pg = await onPgTransaction(conn, name, make, params);
  if (pg) {
    conn.client.emit('query', { sql: pg.plan.sql, bindings: pg.values }); // as knex's own queries announce themselves (db.ts onStatement)
    const result = await pg.connection.runPrepared(pg.plan.pgName!, pg.plan.sql, pg.literals);
    return pg.plan.method === 'run' ? { rows: [], changes: result.rowCount ?? 0 } : { rows: result.rows, changes: 0 };
  }
  if (!onSqlite(conn)) return asResult(await make(conn, ...params));
  if (!isTransaction(conn)) return executeAlone(conn, name, make, params);
  if (conn.isCompleted()) throw new Error(`${name}: the transaction is already complete`); // as knex refuses it
  const plan = planOf(conn, name, make, params.length);
  return runPlan((await conn.client.acquireConnection()) as sqlite3.Database, plan, params);
}

/** The values of `plan`'s bindings: each a parameter's or one fixed in the query. */
const valuesOf = (plan: Plan, params: readonly Value[]): unknown[] => plan.bindings.map((b) => (typeof b === 'number' ? params[b] : b.value));

/** Runs `plan` with `params` on a SQLite connection (prepared once there, statement-cache.ts): its rows, or its changes. */
function runPlan(connection: sqlite3.Database, plan: Plan, params: readonly Value[]): Promise<Executed> {
  const { sql, method } = plan;
  return new Promise((resolve, reject) => {
    connection[method](sql, valuesOf(plan, params), function (this: sqlite3.RunResult, error: Error | null, rows?: Row[]) {
      if (error) reject(error);
      else resolve(method === 'run' ? { rows: [], changes: this.changes } : { rows: rows ?? [], changes: 0 });
    });
  });
}

/** Runs `plan` on SQLite's writing connection outside any transaction: taken from knex's pool, and given back. */
async function runOnWriter(conn: Conn, plan: Plan, params: readonly Value[]): Promise<Executed> {
  const connection = (await conn.client.acquireConnection()) as sqlite3.Database;
  try {
    return await runPlan(connection, plan, params);
  } finally {
    await conn.client.releaseConnection(connection);
  }
}

/**
 * A SQLite write outside any transaction that returns rows (RETURNING): like a
 * transaction's statement, prepared once on the writing connection, which is
 * taken from knex's pool and given back. Through knex, every call built the
 * query anew, compiled it to SQL and sent it through knex's runner (a query
 * object, its event emitter, the pool's bookkeeping): admission's token take,
 * one such statement per submission, cost the main thread more than the
 * statement itself. Writes that return no rows keep knex's path, whose result
 * (an insert's last id, not its changes) their callers may read.
 */
async function executeAlone(conn: Conn, name: string, build: Build, params: readonly Value[]): Promise<Executed> {
  const plan = planOf(conn, name, build, params.length);
  if (plan.method !== 'all') return asResult(await build(conn, ...params));
  return runOnWriter(conn, plan, params);
}

/**
 * A procedure (engine/query.ts note 11), run outside any transaction: one statement that makes a use case's writes,
 * prepared once per connection and bound with `params`, so its SQL is compiled once, not on every call as a batch
 * with its values written in would be, and the statement is its own transaction (autocommit), needing no BEGIN or
 * COMMIT of its own. On SQLite an INSERT into a view whose INSTEAD OF trigger makes the writes, on the writing
 * connection (statement-cache.ts); on Postgres a SELECT of a PL/pgSQL function, sent by node-postgres as a named
 * prepared statement (`{ name, text, values }`: parsed once per pool connection, then bound and run in one round
 * trip). What it gave once it ran (`returning`: the rows of its RETURNING, which a procedure without one must not
 * have); undefined where nothing ran (a procedure with rows is SQLite's only: Postgres has no such views). A failure
 * (a guard's refusal, a key's conflict) undoes the whole statement and is thrown to the caller.
 */
export async function executeProcedure(conn: Conn, name: string, build: Build, params: readonly Value[], returning: boolean): Promise<Executed | undefined> {
  // Inside a transaction it would not be atomic on its own, and its failure would leave the transaction's choice to the caller.
  if (isTransaction(conn)) throw new Error(`${name}: a procedure runs alone, outside any transaction`);
  if (!onSqlite(conn)) {
    if (returning) return undefined;
    await runNamedPg(conn, planOf(conn, name, build, params.length), params);
    return { rows: [], changes: 0 };
  }
  const plan = planOf(conn, name, build, params.length);
  if (plan.method !== (returning ? 'all' : 'run')) {
    throw new Error(returning ? `${name}: a procedure with rows is an INSERT … RETURNING` : `${name}: a procedure is an INSERT returning nothing`);
  }
  return runOnWriter(conn, plan, params);
}

/** The part of node-postgres's Client a named statement needs. */
interface PgNamed {
  query(config: { name: string; text: string; values: unknown[] }): Promise<unknown>;
}

/**
 * Runs `plan` on a Postgres connection of knex's pool as node-postgres's named prepared statement: parsed once per
 * connection under `plan.pgName` (node-postgres remembers which it has parsed), then bound with the values and run,
 * one round trip. The same name space as pg-deferred.ts's SQL PREPARE, whose names come from the same plans.
 */
async function runNamedPg(conn: Conn, plan: Plan, params: readonly Value[]): Promise<unknown> {
  const values = valuesOf(plan, params);
  conn.client.emit('query', { sql: plan.sql, bindings: values }); // as knex's own queries announce themselves (db.ts onStatement)
  const connection = (await conn.client.acquireConnection()) as PgNamed;
  try {
    return await connection.query({ name: plan.pgName!, text: plan.sql, values });
  } finally {
    await conn.client.releaseConnection(connection);
  }
}
