/**
 * Writes that wait, on Postgres (issue 27, item 4): the counterpart of
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
 * When the batch fails, the statement that was waiting behind it is not run and
 * hears the batch's error; a failed COMMIT batch is rolled back first (Postgres
 * skips the rest of a failed multi-statement query, the COMMIT with it, and would
 * leave the connection in the aborted transaction), so the transaction fails as
 * it would have at the write itself.
 */

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
}

export const canDeferPg = (conn: unknown): conn is DeferringPg => typeof (conn as Partial<DeferringPg>)?.deferSql === 'function';

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

/** node-postgres's escapeLiteral (pg/lib/utils.js), which its Client also exposes. */
function escapeLiteral(str: string): string {
  let backslash = false;
  let escaped = "'";
  for (const c of str) {
    if (c === "'") escaped += "''";
    else if (c === '\\') {
      escaped += '\\\\';
      backslash = true;
    } else escaped += c;
  }
  escaped += "'";
  return backslash ? ` E${escaped}` : escaped;
}

/** The query's text and whether it carries bound values (node-postgres's call shapes). */
function shapeOf(config: unknown, values: unknown): { text: string | undefined; bound: boolean } {
  if (typeof config === 'string') return { text: config, bound: Array.isArray(values) && values.length > 0 };
  const c = config as { text?: string; values?: unknown[]; name?: string } | null;
  return { text: c?.text, bound: Boolean(c?.name) || (Array.isArray(c?.values) && c.values.length > 0) };
}

/** The last result of a multi-statement query (the COMMIT's), as a single statement would give it. */
const last = (result: unknown) => (Array.isArray(result) ? result[result.length - 1] : result);

/** Makes `conn` deferring (once; from the pool's afterCreate). Returns it. */
export function deferringPg<C extends PgClient>(conn: C): C & DeferringPg {
  const query = conn.query.bind(conn);
  let waiting: string[] = [];
  let lastly: string[] = [];
  const out = conn as C & DeferringPg;
  out.deferSql = (sql, last = false) => void (last ? lastly : waiting).push(sql);
  const prepared = new Set<string>();
  out.deferPrepared = async (name, text, args, last = false) => {
    if (!prepared.has(name)) {
      await new Promise<void>((resolve, reject) => query(`PREPARE ${name} AS ${text}`, (error: Error | null) => (error ? reject(error) : resolve())));
      prepared.add(name);
    }
    out.deferSql(args.length ? `EXECUTE ${name}(${args.join(', ')})` : `EXECUTE ${name}`, last);
  };
  out.query = function deferredQuery(config: unknown, values?: unknown, callback?: unknown): unknown {
    if (waiting.length === 0 && lastly.length === 0) return query(config, values, callback);
    const cb = (typeof values === 'function' ? values : callback) as Callback | undefined;
    const { text, bound } = shapeOf(config, values);
    // Only knex's callback calls come here with writes waiting (transactions); anything else goes as it came.
    if (typeof cb !== 'function' || text === undefined) return query(config, values, callback);
    const batch = [...waiting, ...lastly].join(';\n');
    waiting = [];
    lastly = [];
    if (ROLLBACK.test(text)) return query(config, values, callback);
    if (COMMIT.test(text) && !bound) {
      query(`${batch};\n${text}`, (error: Error | null, result: unknown) => {
        if (!error) return cb(null, last(result));
        query('ROLLBACK', () => cb(error));
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
