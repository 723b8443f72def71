/**
 * Writes that wait, on Postgres: the counterpart of
 * statement-cache.ts's `defer` for knex's pg connections. A write whose outcome
 * nobody reads (compiled.ts `executeLater`) is queued as complete SQL, its values
 * written in as literals (`pgLiteral`), and sent with the connection's next
 * statement: with the COMMIT in one simple-protocol query when that is next
 * (one round trip for a submission's seven writes and its commit), else just
 * before the next statement as a query of its own, so nothing after them can
 * miss them. A ROLLBACK drops them.
 *
 * Why it matters: a statement sent while a transaction holds an account's
 * balance row waits for a round trip through the event loop, which under load is
 * what keeps the row locked (272 submissions/s for one account, Node at 56 % of
 * a core). Written this way, the rows a submission locks are locked only while
 * Postgres runs the batch, not across round trips.
 *
 * A transaction's BEGIN is held the same way and goes with its first statement
 * (a transaction that sends nothing and rolls back costs no round trip), and a
 * statement whose result is read (compiled.ts `execute`) goes with what waits,
 * as one query (`runPrepared`): a media submission's transaction, where it runs
 * (storage/procedures.ts makes it one statement first), is two round trips, BEGIN
 * with its claim, then its writes with the COMMIT. Statements are prepared once per
 * connection (SQL PREPARE) and run as EXECUTE, so Postgres parses and plans each
 * once. knex's query event (db.ts `onStatement`) still sees every statement;
 * `DEBUG=knex:query` shows a batch as its COMMIT.
 *
 * When the batch fails, the statement that was waiting behind it is not run and
 * hears the batch's error; a failed COMMIT batch is rolled back first (Postgres
 * skips the rest of a failed multi-statement query, the COMMIT with it, and would
 * leave the connection in the aborted transaction), so the transaction fails as
 * it would have at the write itself.
 */
import { createRequire } from 'node:module';

/** The part of node-postgres's Client this module drives. */
interface PgClient {
  query(config: unknown, values?: unknown, callback?: unknown): unknown;
}

type Callback = (error: Error | null, result?: unknown) => void;

/** A pg connection whose writes may wait for its next statement. */
export interface DeferringPg extends PgClient {
  /**
   * Queues complete SQL (values written in) to run with or before the next
   * statement; `last`: after every other waiting write, right before the
   * COMMIT (what locks a contended row: it is then locked the shortest time).
   */
  deferSql(sql: string, last?: boolean): void;
  /**
   * Like `deferSql` for a statement prepared on this connection under `name`
   * (`text` with $1 … placeholders): prepared at its first use, in a round trip
   * of its own (a prepared statement outlives any transaction), then run as
   * `EXECUTE name(args)`, so Postgres parses and plans it once per connection.
   */
  deferPrepared(name: string, text: string, args: string[], last?: boolean): Promise<void>;
  /**
   * Runs a statement prepared like `deferPrepared`'s now, with what waits (a
   * held BEGIN, waiting writes) in the same simple-protocol query: one round
   * trip. Its result, as node-postgres gives it.
   */
  runPrepared(name: string, text: string, args: string[]): Promise<PgResult>;
}

/** The part of a node-postgres result a caller reads. */
export interface PgResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number | null;
}

export const canDeferPg = (conn: unknown): conn is DeferringPg => typeof (conn as Partial<DeferringPg>)?.deferSql === 'function';

const BEGIN = /^\s*(begin|start transaction)\s*;?\s*$/i;
const ROLLBACK = /^\s*(rollback|abort)\b/i;
const COMMIT = /^\s*(commit|end)\b/i;

/**
 * A value as a Postgres literal that reads back as the bound value would: text
 * quoted by node-postgres's own `escapeLiteral` (quotes doubled; backslashes
 * doubled in an E'' string), whole numbers as digits, booleans, NULL. undefined
 * for what has no such literal here (fractions, text holding NUL, objects): the
 * write then runs at once with its values bound.
 */
export function pgLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'string') return value.includes('\0') ? undefined : escapeLiteral(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  return undefined;
}

const requireHere = createRequire(import.meta.url);
let pgEscape: ((str: string) => string) | undefined;
/** node-postgres's own `escapeLiteral`, loaded at the first string (only Postgres paths write literals). */
const escapeLiteral = (str: string) => (pgEscape ??= (requireHere('pg') as { escapeLiteral: (s: string) => string }).escapeLiteral)(str);

/** The query's text and whether it carries bound values (node-postgres's call shapes). */
function shapeOf(config: unknown, values: unknown): { text: string | undefined; bound: boolean } {
  if (typeof config === 'string') return { text: config, bound: Array.isArray(values) && values.length > 0 };
  const c = config as { text?: string; values?: unknown[]; name?: string } | null;
  return { text: c?.text, bound: Boolean(c?.name) || (Array.isArray(c?.values) && c.values.length > 0) };
}

/** The last result of a multi-statement query (the COMMIT's), as a single statement would give it. */
const last = (result: unknown): unknown => (Array.isArray(result) ? result[result.length - 1] : result);

/** What a query gives back as its callback's result, for a statement not sent (a held BEGIN, a ROLLBACK of nothing). */
const unsent = (command: string) => ({ command, rows: [], rowCount: null, fields: [] });

/** Makes `conn` deferring (once; from the pool's afterCreate). Returns it. */
export function deferringPg<C extends PgClient>(conn: C): C & DeferringPg {
  const query = conn.query.bind(conn);
  /** A BEGIN not sent yet: it goes with the transaction's first statement that is. */
  let begin = false;
  let waiting: string[] = [];
  let lastly: string[] = [];
  /** The BEGIN held back and the writes waiting, in order, as one batch; none wait after. */
  const take = (): string[] => {
    const batch = [...(begin ? ['BEGIN'] : []), ...waiting, ...lastly];
    begin = false;
    waiting = [];
    lastly = [];
    return batch;
  };
  const out = conn as C & DeferringPg;
  out.deferSql = (sql, last = false) => void (last ? lastly : waiting).push(sql);
  const prepared = new Set<string>();
  const prepare = async (name: string, text: string) => {
    if (prepared.has(name)) return;
    await new Promise<void>((resolve, reject) => query(`PREPARE ${name} AS ${text}`, (error: Error | null) => (error ? reject(error) : resolve())));
    prepared.add(name);
  };
  const executing = (name: string, args: string[]) => (args.length ? `EXECUTE ${name}(${args.join(', ')})` : `EXECUTE ${name}`);
  out.deferPrepared = async (name, text, args, last = false) => {
    await prepare(name, text);
    out.deferSql(executing(name, args), last);
  };
  out.runPrepared = async (name, text, args) => {
    await prepare(name, text);
    const batch = [...take(), executing(name, args)].join(';\n');
    return new Promise((resolve, reject) =>
      query(batch, (error: Error | null, result: unknown) => (error ? reject(error) : resolve(last(result) as PgResult))),
    );
  };
  out.query = function deferredQuery(config: unknown, values?: unknown, callback?: unknown): unknown {
    const cb = (typeof values === 'function' ? values : callback) as Callback | undefined;
    const { text, bound } = shapeOf(config, values);
    // Only knex's callback calls are held or joined (its transactions); anything else goes as it came.
    if (typeof cb !== 'function' || text === undefined) return query(config, values, callback);
    if (BEGIN.test(text) && !bound && !begin && waiting.length === 0 && lastly.length === 0) {
      begin = true;
      process.nextTick(cb, null, unsent('BEGIN'));
      return undefined;
    }
    if (!begin && waiting.length === 0 && lastly.length === 0) return query(config, values, callback);
    const held = begin;
    const batch = take().join(';\n');
    if (ROLLBACK.test(text)) {
      // Nothing of the transaction reached Postgres when its BEGIN was still held: nothing to roll back.
      if (held) process.nextTick(cb, null, unsent('ROLLBACK'));
      else query(config, values, callback);
      return undefined;
    }
    if (COMMIT.test(text) && !bound) {
      query(`${batch};\n${text}`, (error: Error | null, result: unknown) => {
        if (!error) return cb(null, last(result));
        // After the failed query's ReadyForQuery (a query sent from its error callback would queue behind it).
        setImmediate(() => query('ROLLBACK', () => cb(error)));
      });
      return undefined;
    }
    query(batch, (error: Error | null) => {
      if (error) return cb(error);
      query(config, values, callback);
    });
    return undefined;
  };
  return out;
}
