/**
 * Prepared statements for knex's writing SQLite connection, to save CPU per statement. knex's
 * sqlite3 dialect runs every query as `connection.all(sql, bindings, cb)` or
 * `connection.run(…)`, and node-sqlite3 turns each such call into a new
 * statement: a prepare on the thread pool, the step on the thread pool, then a
 * finalize — two thread-pool round trips and a compile of the SQL for every
 * statement of every transaction. knex compiles the same SQL text for the same
 * query shape each time, so the connection keeps the statements it has prepared,
 * keyed by that text, and re-binds them: one round trip, no re-compile.
 *
 * The results are node-sqlite3's own: `all` gives the rows, and `run` calls back
 * with the statement as `this`, carrying `lastID` and `changes` as knex reads
 * them. A statement reaching SQLITE_DONE is finished (it holds no lock); knex
 * calls `run` only for INSERT/UPDATE/DELETE without RETURNING, which end there.
 * A statement that failed is reset before its caller hears of it: one that got
 * SQLITE_BUSY is not finished but still running, and while it runs SQLite refuses
 * the transaction's ROLLBACK, so the connection would stay in that transaction
 * (with its old snapshot) and every retry would be refused as busy again.
 * Only data statements and transaction control are kept; DDL and PRAGMAs run as
 * before. At most `CAPACITY` statements stay prepared (least recently used go);
 * all are finalized before the connection closes, which SQLite requires.
 *
 * Writes whose outcome nobody reads can also wait (`defer`, compiled.ts
 * `executeLater`): they are sent together, in one thread-pool round trip
 * (`exec`), just before the connection's next statement of any kind, so nothing
 * after them can miss them; a ROLLBACK drops them instead, and a COMMIT travels
 * in the same batch. When that batch fails, the statement that was waiting
 * behind it is not run and hears the batch's error (a COMMIT rolls the
 * transaction back first), so the transaction fails as it would have at the
 * write itself.
 *
 * A transaction's BEGIN is held the same way (as pg-deferred.ts holds it on
 * Postgres): it goes with whatever comes next, so a transaction whose first
 * write waits (the claim of an identity, idempotency.ts) sends BEGIN and that
 * write in the batch before its first checked statement: one round trip less. A
 * transaction that sent nothing and rolls back, or commits, costs none: nothing
 * ran, so there is nothing to end.
 */
import type sqlite3 from 'sqlite3';

type Callback = (this: sqlite3.Statement, error: Error | null, rows?: unknown) => void;
type Method = 'all' | 'run';

/** A connection whose writes may wait for its next statement (`cacheStatements`). */
export interface DeferringConnection extends sqlite3.Database {
  /** Queues complete SQL (values written in) to run just before the next statement. */
  defer(sql: string): void;
  /** Runs what waits now. */
  flushDeferred(callback: (error: Error | null) => void): void;
}

export const canDefer = (conn: sqlite3.Database): conn is DeferringConnection => typeof (conn as Partial<DeferringConnection>).defer === 'function';

const ROLLBACK = /^\s*rollback\b/i;
const COMMIT = /^\s*(commit|end)\b/i;
/** A plain BEGIN (DEFERRED: it takes no lock until the transaction's first statement), the one that may be held. */
const BEGIN = /^\s*begin(\s+deferred)?(\s+transaction)?\s*;?\s*$/i;

/** How many distinct statements stay prepared (knex's hot queries number a few dozen). */
const CAPACITY = 256;
/** SQL worth keeping prepared: data statements and transaction control, not DDL or PRAGMAs. */
const CACHEABLE = /^\s*(select|insert|update|delete|with|begin|commit|rollback|savepoint|release)\b/i;

interface Entry {
  /** Set once the prepare succeeded. */
  statement?: sqlite3.Statement;
  /** Settles with the prepare. */
  ready: Promise<sqlite3.Statement>;
  /** When it was last used, on the connection's own count of uses. */
  used: number;
}

/**
 * Makes `conn.all` and `conn.run` reuse prepared statements and lets writes wait
 * (`defer`); `conn.close` finalizes the statements first. Returns `conn`.
 */
export function cacheStatements(conn: sqlite3.Database): DeferringConnection {
  // Recency is a count kept on each entry, not the map's order: re-inserting on every use made V8
  // rebuild the map's table every few hundred uses, garbage that outlived young collections.
  const entries = new Map<string, Entry>();
  let uses = 0;
  const original = { all: conn.all.bind(conn), run: conn.run.bind(conn), exec: conn.exec.bind(conn), close: conn.close.bind(conn) };
  let deferred: string[] = [];
  /** Whether `deferred` starts with a BEGIN not sent yet: nothing of the transaction has run. */
  let heldBegin = false;

  /** Sends the waiting writes in one `exec`, then `next`; a failure goes to `failed` instead. */
  const flush = (next: () => void, failed: (error: Error) => void) => {
    const sql = deferred.join(';\n');
    const alone = heldBegin && deferred.length === 1;
    deferred = [];
    heldBegin = false;
    // A held BEGIN alone stays a prepared statement: `exec` would parse it again every time.
    if (alone) cached('run', sql, [], (error) => (error ? failed(error) : next()));
    else original.exec(sql, (error) => (error ? failed(error) : next()));
  };
  /**
   * Runs `statement` after whatever waits (dropped for a ROLLBACK); a failed batch
   * fails `statement` instead. A COMMIT goes at the end of the batch itself, one
   * round trip for both (`committed` then answers for it): `exec` stops at the
   * first failing statement, so a failed write never commits, and the
   * transaction is rolled back before the failure is reported.
   */
  const afterDeferred = (sql: string, statement: () => void, fail: (error: Error) => void, committed: () => void) => {
    if (deferred.length === 0) return statement();
    if (ROLLBACK.test(sql) || (heldBegin && COMMIT.test(sql) && deferred.length === 1)) {
      // Dropped unsent: with the BEGIN still held nothing ran, so there is nothing to roll back (or to commit).
      const unsent = heldBegin;
      deferred = [];
      heldBegin = false;
      return unsent ? committed() : statement();
    }
    if (!COMMIT.test(sql)) return flush(statement, fail);
    deferred.push(sql);
    flush(committed, (error) => original.run('ROLLBACK', () => fail(error)));
  };

  const prepare = (sql: string): Entry => {
    const entry = { used: ++uses } as Entry;
    entry.ready = new Promise((resolve, reject) => {
      const statement = conn.prepare(sql, (error) => {
        if (error) {
          entries.delete(sql); // the next call prepares again (the schema may have changed)
          reject(error);
          return;
        }
        entry.statement = statement;
        resolve(statement);
      });
    });
    entry.ready.catch(() => undefined); // each caller gets the failure through its own callback
    entries.set(sql, entry);
    if (entries.size > CAPACITY) {
      let [oldest, evicted] = [sql, entry];
      for (const [key, candidate] of entries) if (candidate.used < evicted.used) [oldest, evicted] = [key, candidate];
      entries.delete(oldest);
      void evicted.ready.then(
        (s) => s.finalize(),
        () => undefined,
      ); // finalize runs after its queued calls
    }
    return entry;
  };

  const call = (method: Method) =>
    function (sql: string, params: unknown, callback: Callback): sqlite3.Database {
      const cb = (typeof params === 'function' ? params : callback) as Callback;
      // What node-sqlite3 answers for a BEGIN or a COMMIT: no rows, no row changed.
      const committed = () => (method === 'all' ? cb.call(undefined as never, null, []) : cb.call({ lastID: 0, changes: 0 } as never, null));
      if (deferred.length === 0 && BEGIN.test(sql)) {
        deferred.push(sql);
        heldBegin = true;
        process.nextTick(committed); // answered as node-sqlite3 would: later, never inside the call
        return conn;
      }
      if (deferred.length > 0) {
        afterDeferred(
          sql,
          () => void cached(method, sql, params, callback),
          (error) => cb.call(undefined as never, error),
          committed,
        );
        return conn;
      }
      return cached(method, sql, params, callback);
    };

  const cached = (method: Method, sql: string, params: unknown, callback: Callback): sqlite3.Database => {
    if (typeof params === 'function' || !CACHEABLE.test(sql)) return (original[method] as (...a: unknown[]) => sqlite3.Database)(sql, params, callback);
    let entry = entries.get(sql);
    if (entry) entry.used = ++uses;
    else entry = prepare(sql);
    const bindings = Array.isArray(params) ? params : params === undefined ? [] : [params];
    const run = (statement: sqlite3.Statement) =>
      statement[method](bindings, function (this: sqlite3.Statement, error: Error | null, rows?: unknown) {
        if (error) statement.reset(() => callback.call(this, error));
        else callback.call(this, null, rows);
      });
    if (entry.statement) run(entry.statement);
    else entry.ready.then(run, (error: Error) => callback.call(undefined as never, error));
    return conn;
  };

  conn.all = call('all') as typeof conn.all;
  conn.run = call('run') as typeof conn.run;
  conn.exec = (sql: string, callback?: (error: Error | null) => void) => {
    afterDeferred(
      sql,
      () => void original.exec(sql, callback),
      (error) => callback?.(error),
      () => callback?.(null),
    );
    return conn;
  };
  const deferring = conn as DeferringConnection;
  deferring.defer = (sql) => void deferred.push(sql);
  deferring.flushDeferred = (callback) => (deferred.length === 0 ? callback(null) : flush(() => callback(null), callback));
  conn.close = (callback?: (error: Error | null) => void) => {
    deferred = [];
    heldBegin = false;
    const pending = [...entries.values()].map((e) =>
      e.ready.then(
        (s) => new Promise<void>((resolve) => s.finalize(() => resolve())),
        () => undefined,
      ),
    );
    entries.clear();
    void Promise.all(pending).then(() => original.close(callback));
    return conn;
  };
  return deferring;
}

const tracing = new WeakMap<sqlite3.Database, Set<(sql: string) => void>>();

/**
 * Calls `listener` with the SQL of every statement `conn` runs, shortly after
 * (sqlite3's trace); returns the function that stops it. node-sqlite3 toggles
 * its trace hook on every `on('trace')` (a second listener would switch it
 * off), so each connection gets one listener of its own that fans out.
 */
export function traceStatements(conn: sqlite3.Database, listener: (sql: string) => void): () => void {
  let listeners = tracing.get(conn);
  if (!listeners) {
    const fanOut = new Set<(sql: string) => void>();
    listeners = fanOut;
    tracing.set(conn, fanOut);
    conn.on('trace', (sql: string) => {
      for (const l of fanOut) l(sql);
    });
  }
  listeners.add(listener);
  const own = listeners;
  return () => own.delete(listener);
}
