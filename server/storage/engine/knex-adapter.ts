/**
 * The one file that uses knex's private internals (so an upgrade breaks one place; knex is
 * pinned in package.json, and test/unit/borrowed-internals.test.ts fails naming
 * this file when an upgrade changes what it relies on). Three things, each
 * measured (docs/development.md, "Borrowed internals"):
 *
 *   leanTransaction  transactions without knex's per-transaction knex instance
 *   SqliteClient     knex's SQLite dialect with LIMIT written into the SQL
 *   statementKind    what a compiled query is (its method, whether it returns rows)
 *   offset(raw)      a raw offset binding, which knex takes but does not type (below)
 *
 * Transactions without knex's per-transaction knex instance (on the
 * SQLite writer, and on Postgres, where knex's transactions cost the same
 * garbage: server CPU per image submission 1,166 → 1,057 µs side by side). knex's `db.transaction(fn)` builds, for every
 * transaction, a whole knex instance for `fn` to query through: a function
 * with about 150 methods of its own as fresh closures, property definitions
 * and an event emitter (~20 KB), plus a client object with four listeners.
 * Under 32 concurrent image submissions those objects outlived two young-
 * generation collections: every scavenge promoted 5–8 MB and paused 12–24 ms
 * (all 32 requests in flight wait), and the promoted garbage grew the heap to
 * a mark-compact every few seconds. V8's sampling heap profiler, keeping only
 * objects that died in old space, put 70 % of them in knex's per-transaction
 * instance and most of the rest in its transaction and client objects. With
 * the transaction below a scavenge promotes ~15 KB and pauses ~1.5 ms, and the
 * mark-compacts stop (`node --trace-gc-nvp`, same load).
 *
 * What `fn` gets is still a knex transaction in everything it does: a callable
 * whose prototype is a per-database object inheriting from the root knex
 * instance itself (every query method, `raw`, `fn`, `schema` and the rest
 * read `this.context.client`), with its own context holding a client that
 * always answers with this transaction's connection and refuses queries once
 * the transaction is complete ("Transaction query already complete", as knex).
 * Queries, their events and their errors are knex's own. The life cycle is
 * knex's as well: the connection from the pool (the same FIFO queue), BEGIN,
 * `fn`, COMMIT — or ROLLBACK when `fn` throws, failing with what it threw.
 * Two differences, both on paths knex handled worse: a failed COMMIT rolls
 * back (knex left SQLite inside the transaction, so the connection's next
 * BEGIN failed), and a connection whose ROLLBACK fails is given up so the pool
 * opens a new one. Nested transactions (savepoints) are refused: nothing here
 * uses them. On Postgres a ROLLBACK with no transaction open is a warning, not
 * an error, so the same life cycle holds there.
 */
import type { Knex } from 'knex';
import SqliteDialect from 'knex/lib/dialects/sqlite3/index.js';

declare module 'knex' {
  namespace Knex {
    interface QueryInterface<TRecord extends {} = any, TResult = any> {
      /**
       * An offset given as a raw binding: knex's builder takes one (its offset()
       * keeps a raw instance as it is), its types say only `number`. A compiled
       * statement (compiled.ts) needs it: its parameters are sentinel strings at
       * compile time, which offset() would parse as NaN and drop, so a page's
       * offset is bound through `c.raw('?', [offset])`.
       */
      offset(offset: Knex.Raw, options?: boolean | Readonly<{ skipBinding?: boolean }>): Knex.QueryBuilder<TRecord, TResult>;
    }
  }
}

type Tx = Knex.Transaction;
type AnyFunction = (...args: never[]) => unknown;

/** What the shared transaction client adds to the root client; each transaction's own client carries these two. */
interface TxClient extends Knex.Client {
  txConnection: unknown;
  txCompleted: boolean;
}

interface Kit {
  /** The prototype of each transaction's client: the root client, answering with the transaction's connection. */
  client: TxClient;
  /** The prototype of each transaction's context: the root context, without what a transaction must not do. */
  context: object;
  /** The prototype of each transaction function: the root knex instance, as a transaction. */
  transactor: object;
}

const kits = new WeakMap<Knex, Kit>();

/** Own properties on `target`, also where its prototype has a read-only one of that name (db.ts redefines `destroy`). */
function own(target: object, props: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(props)) Object.defineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });
}

/** Why a transaction's client refuses a query on `conn` (knex's own messages), or undefined when it runs it. */
function refusal(client: TxClient, conn: unknown): Promise<never> | undefined {
  if (conn !== client.txConnection) return Promise.reject(new Error('Invalid connection for transaction query.'));
  if (client.txCompleted) return Promise.reject(new Error('Transaction query already complete, run with DEBUG=knex:tx for more info'));
  return undefined;
}
const notHere = (what: string) => () => {
  throw new Error(
    `${what} is not available on a transaction of inTransaction (nested transactions are not used; commit or roll back by returning or throwing)`,
  );
};

function kitOf(db: Knex): Kit {
  let kit = kits.get(db);
  if (kit) return kit;
  const root = db.client as Record<string, AnyFunction>; // knex types its client `any`
  const client = Object.create(root) as TxClient & Record<string, unknown>;
  own(client, {
    transacting: true,
    acquireConnection(this: TxClient) {
      return Promise.resolve(this.txConnection);
    },
    releaseConnection() {
      return Promise.resolve();
    },
    query(this: TxClient, conn: unknown, ...rest: unknown[]) {
      return refusal(this, conn) ?? root.query.call(this, conn as never, ...(rest as never[]));
    },
    stream(this: TxClient, conn: unknown, ...rest: unknown[]) {
      return refusal(this, conn) ?? root.stream.call(this, conn as never, ...(rest as never[]));
    },
  });
  const context = Object.create((db as unknown as { context: object }).context) as Record<string, unknown>;
  own(
    context,
    Object.fromEntries(
      ['transaction', '_transaction', 'transactionProvider', 'withUserParams', 'destroy', 'initialize'].map((name) => [name, notHere(`knex's ${name}()`)]),
    ),
  );
  const transactor = Object.create(db) as Record<string, unknown>;
  own(transactor, {
    isTransaction: true,
    isCompleted(this: { context: { client: TxClient } }) {
      return this.context.client.txCompleted;
    },
    savepoint: notHere('savepoint()'),
    commit: notHere('commit()'),
    rollback: notHere('rollback()'),
    destroy: notHere('destroy()'), // db.ts gives the root its own `destroy`, past the context; `transaction` goes through the context
  });
  kit = { client, context, transactor };
  kits.set(db, kit);
  return kit;
}

/** A knex transaction for `connection`: a callable query starter whose client answers with that connection. */
function transactionFor(kit: Kit, connection: unknown): { trx: Tx; client: TxClient } {
  const client = Object.create(kit.client) as TxClient;
  client.txConnection = connection;
  client.txCompleted = false;
  const context = Object.create(kit.context) as { client: TxClient; queryBuilder(): Knex.QueryBuilder };
  context.client = client;
  // knex's own starter (make-knex.js createQueryBuilder): `trx('table')` → a builder on the transaction's client.
  const trx = function (tableName?: string, options?: unknown) {
    const builder = context.queryBuilder();
    if (!tableName) client.logger.warn?.('calling knex without a tableName is deprecated. Use knex.queryBuilder() instead.');
    return tableName ? builder.table(tableName, options as never) : builder;
  } as unknown as Tx & { context: object };
  Object.setPrototypeOf(trx, kit.transactor);
  trx.context = context;
  return { trx, client };
}

/**
 * Runs `fn` in a transaction on a connection of `db`'s pool, as knex's
 * `db.transaction(fn)` would: COMMIT when it resolves, ROLLBACK when it throws.
 */
export async function leanTransaction<T>(db: Knex, fn: (trx: Tx) => Promise<T>): Promise<T> {
  const kit = kitOf(db);
  const connection: unknown = await db.client.acquireConnection();
  const { trx, client } = transactionFor(kit, connection);
  const send = (sql: string) => db.client.query(connection, sql) as Promise<unknown>;
  try {
    await send('BEGIN;');
    let value: T;
    try {
      value = await fn(trx);
    } catch (error) {
      client.txCompleted = true;
      await rollBack(db, connection, send);
      throw error;
    }
    client.txCompleted = true;
    try {
      await send('COMMIT;');
    } catch (error) {
      await rollBack(db, connection, send); // SQLite may still be inside the transaction (Postgres has ended it: a no-op)
      throw error;
    }
    return value;
  } finally {
    client.txCompleted = true; // a BEGIN that failed
    void db.client.releaseConnection(connection);
  }
}

const NO_TRANSACTION = /no transaction is active/;

/** ROLLBACK; when even that fails (other than there being nothing to roll back), the pool gives the connection up. */
async function rollBack(db: Knex, connection: unknown, send: (sql: string) => Promise<unknown>): Promise<void> {
  try {
    await send('ROLLBACK;');
  } catch (error) {
    if (NO_TRANSACTION.test(String(error))) return;
    (connection as { __knex__disposed?: unknown }).__knex__disposed = error;
    db.client.logger.warn?.(`ROLLBACK failed; the connection is replaced: ${String(error)}`);
  }
}

/**
 * knex's SQLite client, with each query's LIMIT written into its SQL instead of
 * bound. SQLite plans a bound LIMIT with the value bound when it prepares the
 * statement, so binding that parameter again marks the statement expired and its
 * next step prepares it again (parse and plan, every time: sqlite3ExprIsInteger
 * sets the statement's variable mask). A kept statement (statement-cache.ts,
 * reads.ts) with `.first()` or `.limit(n)` would lose what keeping it saves.
 * knex makes every limit a whole number (parseInt), so it goes into the SQL as
 * digits; limits are few (1 and page sizes), so the statements they make stay
 * few. OFFSET stays bound: SQLite does not plan on it, and its values are many.
 * A subclass, not a patched instance, because a transaction's client is made
 * from the class's prototype. Internal: the builder's `_single` and its `skipBinding`.
 */
export class SqliteClient extends SqliteDialect {
  override queryCompiler(builder: Knex.QueryBuilder, formatter?: unknown): unknown {
    const single = (builder as unknown as { _single: Record<string, unknown> })._single;
    if (Number.isSafeInteger(single.limit)) single.skipBinding = { ...(single.skipBinding as object | undefined), limit: true };
    return super.queryCompiler(builder, formatter);
  }
}

/** What a compiled query is: knex's method name (`select`, `insert`, `update`, `del`, `raw` …) and whether it returns rows. Internal: `toSQL()`'s `method` and `returning`. */
export function statementKind(compiled: Knex.Sql): { method: string; returning: boolean } {
  const { method, returning } = compiled as unknown as { method: string; returning?: unknown };
  return { method, returning: Boolean(returning) };
}
