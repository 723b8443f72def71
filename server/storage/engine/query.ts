/**
 * The query engine (this folder, server/storage/engine/): how a statement is
 * compiled, kept prepared, gathered, deferred and run on SQLite and on
 * Postgres, and the connections it runs on (reads.ts, checkpoint.ts,
 * sqlite-connection.ts, knex-adapter.ts). The table modules of server/storage
 * use this file only: `statement`, `query`, `insertRow`, the row helpers
 * (`rowOf`, `rowParams`, `columnsOf`) and the types `Conn`, `Value`, `Row`.
 * The rest of the folder is imported by this file and by the wiring that opens
 * the database (../db.ts), never by a table module; nothing here imports a
 * table module (of storage outside the folder only outages.ts, the store-failure
 * counts; test/unit/one-query-path.test.ts holds both rules).
 *
 * The one way storage queries the database. Every statement
 * is a knex builder written once, with a name and a kind, and run with
 * `query(conn, statement, params)`; what prepares, caches, gathers and defers
 * statements (compiled.ts, reads.ts, statement-cache.ts, pg-deferred.ts) lives
 * behind this module, and no other storage module reaches it.
 *
 *   const taskById = statement.first<TaskRow>('task-by-id', (c, id) => c('tasks').where({ id }).first());
 *   const task = await query(db, taskById, [id]);
 *
 * The builder takes the statement's parameters and must use them only as
 * values (no `limit(p)`, no `slice` of one, no identifier): each name is
 * compiled once per database kind, with stand-ins for its parameters, and the
 * compiled SQL is then reused with the real values. So **a name fixes the SQL**:
 * whatever changes the SQL text (the set of patched columns, an IN list's
 * length, a row count, a page size, an optional filter) goes into the name,
 * e.g. `task-update:${columns}`. Under the test runner (and NODE_ENV=test) every
 * call compiles again and throws when one name gives two SQL texts, or when a
 * parameter is not bound as a value; in production that costs nothing.
 *
 * Where each kind runs, and why:
 *
 *   kind     SQLite, outside a transaction     SQLite, in a transaction       Postgres, in a transaction        Postgres outside one (and SQLite without read connections)
 *   rows     read connection, prepared (1)     writer's connection, prepared (2)  PREPARE/EXECUTE, sent with what waits (3)  knex (4)
 *   first    as rows; its first row (undefined when none)
 *   byKey    read connection, gathered (5)     as rows, for its key           as rows, for its key              knex, for its key
 *   write    knex (6)                          writer's connection, prepared  PREPARE/EXECUTE                   knex
 *   checked  as write                          with what waits, at once (9)   as write                          knex
 *   later    knex, at once                     waits for the next statement (7)  waits for the next statement (7)  knex, at once
 *   guarded  at once, then its check          waits, then its guard (10)     at once, then its check (10)      at once, then its check
 *   procedure  writer's, prepared (11)         refused (an error)             refused (an error)                named, prepared (11)
 *   procedureRows  as procedure; its RETURNING rows   refused (an error)        not run: undefined                not run: undefined
 *   dynamic  knex, built each time, everywhere (8)
 *
 * 1. reads.ts: read-only connections beside the single writer (WAL: they see the
 *    last commit and never wait for a transaction), statements prepared once.
 * 2. compiled.ts `execute`: the SQL and values straight to the transaction's
 *    connection, whose statements stay prepared (statement-cache.ts); it must
 *    see the transaction's own writes, so never a read connection.
 * 3. pg-deferred.ts: prepared once per pool connection, run as EXECUTE in the
 *    same round trip as a held BEGIN and the writes waiting; a value with no
 *    exact literal (a fraction) runs through knex instead.
 * 4. knex's pool already holds several connections; a prepared statement needs
 *    its connection pinned, which only a transaction does.
 * 5. reads.ts `readByKey`: every read of the same statement asked for in one
 *    round of the event loop goes out as one statement for all their keys.
 * 6. Through knex's one writing connection, whose statement cache prepares by
 *    SQL text: the pool orders these writes with the transactions.
 * 7. A write whose outcome nobody reads: it leaves with the transaction's next
 *    statement, its COMMIT included (SQLite: values written in as literals,
 *    statement-cache.ts `defer`; Postgres: EXECUTE, `last` puts it after every
 *    other waiting write, right before the COMMIT). A failure fails the
 *    transaction as the write would have.
 * 8. What cannot be compiled once: DDL and session statements (`VACUUM INTO`,
 *    `SET TRANSACTION`), and statements whose shape is data (a sweep over a
 *    computed list of ids, batches of rows). Still written here, still named.
 * 9. A write whose only outcome read is whether it failed (an identity's claim,
 *    refused by its primary key when made before): sent at once at the end of
 *    what waits, a held BEGIN included, in one `exec` (compiled.ts
 *    `executeChecked`); its caller hears its failure there.
 * 10. A write that must change exactly `rows` rows, whose miss may be heard
 *    late (at the COMMIT): it waits as `later` does, followed by a guard
 *    (migration 020's `gemforge_guards`) that fails the batch unless `changes()`
 *    says so. On Postgres it runs at once and is checked there. Either way a
 *    miss fails the transaction with an error `guardRefusal` names (and so does
 *    Postgres's `gemforge_guard()`, migration 011), and the caller rolls back
 *    and decides again the step-by-step way, which says what it was. So a
 *    settlement is one round trip on SQLite (compiled.ts `executeGuarded`).
 * 11. A use case's writes as one statement of the database (a migration's; the
 *    procedures are storage/procedures.ts): on SQLite an INSERT into a view whose
 *    INSTEAD OF trigger makes them, on the writer's connection; on Postgres a
 *    SELECT of a PL/pgSQL function, as node-postgres's named prepared statement
 *    on a pool connection. One statement is atomic in autocommit, so no BEGIN or
 *    COMMIT of its own: one round trip, prepared once per connection and bound
 *    with the values (compiled.ts `executeProcedure`). Where a use case has no
 *    such statement on a database, procedures.ts answers false having run
 *    nothing; its caller then writes step by step. Its failure (a guard, a key's
 *    conflict) leaves nothing written.
 *
 * Rows come back as the driver gives them: booleans are 0/1 on SQLite, whole
 * numbers are numbers on both (db.ts parses Postgres's bigint and numeric).
 */
import type { Knex } from 'knex';
import {
  asResult,
  compile,
  execute,
  executeChecked,
  executeGuarded,
  executeLater,
  executeProcedure,
  guardRefusal,
  rowOf,
  rowParams,
  type Build,
  type Executed,
  type Row,
  type Value,
} from './compiled.ts';
import { KEY_COLUMN, readByKey, readRows } from './reads.ts';
import { countStoreError, isDatabaseFailure } from '../outages.ts';

export type { Row, Value };
export { guardRefusal, rowOf, rowParams };

/** The columns a patch sets (knex leaves out those undefined): put them into the statement's name. */
export const columnsOf = <T extends object>(patch: T): Array<keyof T & string> =>
  (Object.keys(patch) as Array<keyof T & string>).filter((c) => patch[c] !== undefined);
/** What a statement runs on: the database, or a transaction of it. */
export type Conn = Knex | Knex.Transaction;

/** How a statement runs (see the table above). */
export type Kind = 'rows' | 'first' | 'byKey' | 'write' | 'checked' | 'later' | 'guarded' | 'procedure' | 'procedureRows' | 'dynamic';

/** A named statement: what `query` runs. Make one with `statement.<kind>`. */
export interface Statement<K extends Kind = Kind, R = Row> {
  readonly name: string;
  readonly kind: K;
  readonly build: Build;
  /** byKey: the column the key is compared with (as text). */
  readonly keyColumn?: string;
  /** later, on Postgres: after every other waiting write, right before the COMMIT. */
  readonly last?: boolean;
  /** guarded: how many rows the write must change, and what its refusal says (`guardRefusal`). */
  readonly guard?: { rows: number; what: string };
  /** Only carries the row type. */
  readonly row?: R;
}

/** What a write gave: its RETURNING rows, and how many rows an UPDATE or DELETE changed. */
export interface Written<R = Row> {
  rows: R[];
  changes: number;
}

type Result<K extends Kind, R> = K extends 'rows' | 'byKey'
  ? R[]
  : K extends 'first'
    ? R | undefined
    : K extends 'write' | 'dynamic'
      ? Written<R>
      : K extends 'procedure'
        ? boolean
        : K extends 'procedureRows'
          ? R[] | undefined
          : void;

/** A query of one key's rows: the builder must neither filter on the key nor limit its rows. */
type KeyedBuild = (c: Conn) => Knex.QueryBuilder;

/** Statements, by kind. */
export const statement = {
  /** A read: its rows. */
  rows: <R = Row>(name: string, build: Build): Statement<'rows', R> => ({ name, kind: 'rows', build }),
  /** A read: its first row. The builder says `.first()` or `.limit(1)` itself (the SQL stays the builder's). */
  first: <R = Row>(name: string, build: Build): Statement<'first', R> => ({ name, kind: 'first', build }),
  /** A read of the rows of one key (the one parameter), gathered with other reads of it on SQLite's read connections. Each row also carries the key as `read_key`. */
  byKey: <R = Row>(name: string, keyColumn: string, build: KeyedBuild): Statement<'byKey', R> => ({ name, kind: 'byKey', build: build as Build, keyColumn }),
  /** A write whose outcome is read: rows changed, RETURNING rows. */
  write: <R = Row>(name: string, build: Build): Statement<'write', R> => ({ name, kind: 'write', build }),
  /** A write whose only outcome read is whether it failed (no rows, no count): at once, in a transaction with what waits. */
  checked: (name: string, build: Build): Statement<'checked', never> => ({ name, kind: 'checked', build }),
  /** A write whose outcome nobody reads: in a transaction it may wait for the next statement. */
  later: (name: string, build: Build, options: { last?: boolean } = {}): Statement<'later', never> => ({
    name,
    kind: 'later',
    build,
    last: options.last ?? false,
  }),
  /**
   * A write of a transaction that must change exactly `rows` rows (default 1), whose miss may be heard at the
   * transaction's next statement or its COMMIT: the transaction then fails with an error `guardRefusal` says is
   * `what`. The build must be a knex insert, update or delete (or, on SQLite only, raw SQL returning nothing).
   */
  guarded: (name: string, what: string, build: Build, options: { rows?: number } = {}): Statement<'guarded', never> => ({
    name,
    kind: 'guarded',
    build,
    guard: { rows: options.rows ?? 1, what },
  }),
  /**
   * Writes of several tables as one statement (note 11 above: SQLite, an INSERT into a view whose INSTEAD OF
   * trigger makes them; Postgres, a SELECT of a function that does): run outside any transaction, it answers true
   * once it ran. The build must be a knex insert into that view, or a raw SELECT of that function.
   */
  procedure: (name: string, build: Build): Statement<'procedure', never> => ({ name, kind: 'procedure', build }),
  /**
   * A procedure whose INSERT says what its trigger decided (`RETURNING`, whose subqueries see the trigger's writes):
   * its rows where it ran, undefined where there is none (Postgres: nothing ran).
   */
  procedureRows: <R = Row>(name: string, build: Build): Statement<'procedureRows', R> => ({ name, kind: 'procedureRows', build }),
  /** A statement built and run through knex at every call (nothing compiled once). */
  dynamic: <R = Row>(name: string, build: (c: Conn, ...params: Value[]) => Knex.QueryBuilder | Knex.Raw | Knex.SchemaBuilder): Statement<'dynamic', R> => ({
    name,
    kind: 'dynamic',
    build: build as Build,
  }),
};

/** INSERTs `row` into `table`: the columns it sets (those it leaves out keep their defaults), one statement per set of columns. */
export async function insertRow(conn: Conn, table: string, row: object): Promise<void> {
  const values = row as Record<string, unknown>;
  const columns = columnsOf(values);
  await query(
    conn,
    statement.write(`${table}-insert:${columns}`, (c, ...v) => c(table).insert(rowOf(columns, v))),
    rowParams(columns, values),
  );
}

/**
 * Fault injection for tests of database outages (like blobs.ts `diskFaults`):
 * when set, runs before every statement with its name and connection, and may
 * throw (a SQLite test throws the error a failing database gives) or break the
 * connection itself (a Postgres test terminates the backend). Unset in production.
 */
export const databaseFaults: { statement?: (name: string, conn: Conn) => Promise<void> | void } = {};

const isTransaction = (conn: Conn): conn is Knex.Transaction => (conn as { isTransaction?: boolean }).isTransaction === true;

/** Runs `st` with `params` on `conn` (see the table above for where). */
export async function query<K extends Kind, R>(conn: Conn, st: Statement<K, R>, params: readonly Value[] = []): Promise<Result<K, R>> {
  if (CHECK_SHAPES) checkShape(conn, st, params);
  try {
    if (databaseFaults.statement) await databaseFaults.statement(st.name, conn);
    return (await run(conn, st, params)) as Result<K, R>;
  } catch (error) {
    // The database unreachable or refusing work (not a wrong statement): counted by statement for /metrics.
    if (isDatabaseFailure(error)) countStoreError('database', st.name, error);
    throw error;
  }
}

async function run(conn: Conn, st: Statement<Kind, unknown>, params: readonly Value[]): Promise<unknown> {
  switch (st.kind) {
    case 'rows':
      return isTransaction(conn) ? (await execute(conn, st.name, st.build, params)).rows : readRows(conn, st.name, st.build, params);
    case 'first':
      return (isTransaction(conn) ? (await execute(conn, st.name, st.build, params)).rows : await readRows(conn, st.name, st.build, params))[0];
    case 'byKey':
      if (isTransaction(conn)) return (await execute(conn, `${st.name}:key`, keyed(st), params)).rows;
      return readByKey(conn, st.name, st.build as KeyedBuild, st.keyColumn!, String(params[0]));
    case 'write':
      return execute(conn, st.name, st.build, params);
    case 'checked':
      return executeChecked(conn, st.name, st.build, params);
    case 'later':
      return executeLater(conn, st.name, st.build, params, st.last);
    case 'guarded':
      return executeGuarded(conn, st.name, st.build, params, st.guard!);
    case 'procedure':
      return (await executeProcedure(conn, st.name, st.build, params, false)) !== undefined;
    case 'procedureRows':
      return (await executeProcedure(conn, st.name, st.build, params, true))?.rows;
    case 'dynamic':
      return asResult(await st.build(conn, ...params)) satisfies Executed;
  }
}

/** A byKey statement as a read of its one key (in a transaction; and what the shape check compiles). */
const keyed =
  (st: Statement<Kind, unknown>): Build =>
  (c, key) =>
    (st.build(c) as Knex.QueryBuilder).where(st.keyColumn!, key).select({ [KEY_COLUMN]: st.keyColumn! });

/**
 * Under the test runner (node --test sets NODE_TEST_CONTEXT) or NODE_ENV=test:
 * every call compiles its statement again and compares it with the first SQL
 * its name gave on that kind of database.
 */
const CHECK_SHAPES = process.env.NODE_TEST_CONTEXT !== undefined || process.env.NODE_ENV === 'test';
const shapes = new Map<string, string>();

function checkShape(conn: Conn, st: Statement<Kind, unknown>, params: readonly Value[]): void {
  if (st.kind === 'dynamic') return;
  // compile() throws when a parameter is not bound as a value.
  const { sql } = compile(conn, st.kind === 'byKey' ? keyed(st) : st.build, params.length);
  const key = `${(conn.client as { dialect?: string }).dialect} ${st.name}`;
  const seen = shapes.get(key);
  if (seen === undefined) shapes.set(key, sql);
  else if (seen !== sql) throw new Error(`statement ${st.name}: one name, two SQL texts (put what varies into the name):\n${seen}\n${sql}`);
}
