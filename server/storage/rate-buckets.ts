/**
 * Token buckets of request admission (migration 017), shared by every API
 * instance on the database. A bucket holds up to `burst` tokens and refills at
 * `rate` per second; a request takes one token from each of its buckets in one
 * statement, which refills and takes in the same UPDATE (a conditional upsert:
 * no read first). On its own (`takeTokens`) it holds no lock past the statement;
 * on Postgres a media submission sends it with its COMMIT (`guardTokens`), so its
 * locks last to the end of that batch.
 */
import { isSqlite } from './db.ts';
import { guardRefusal, query, statement, type Conn, type Value } from './engine/query.ts';

export interface Bucket {
  id: string;
  /** Tokens per second. */
  rate: number;
  /** The most tokens it holds (the burst a quiet client may send at once). */
  burst: number;
}

/** The bucket's tokens at `excluded.at_ms` (the request's time): refilled since its last take, never above its burst; a clock behind the last take refills nothing. */
const refilled = (least: string, greatest: string) =>
  `${least}(excluded.burst, rate_buckets.tokens + ${greatest}(0, excluded.at_ms - rate_buckets.at_ms) * excluded.rate / 1000.0)`;

/**
 * The SQL that takes a token from each of `n` buckets that has one, RETURNING the
 * ids that gave one. `capped`: only while the account's queued media jobs (its
 * queue_turns rows, kept by migration 017's triggers) are under a cap, read in the
 * same statement: the rows to upsert are selected under that condition, so at the
 * cap no bucket is made or taken from. One statement instead of a read then a
 * write: each is a round trip through node-sqlite3's thread pool, which is most of
 * what admission costs a submission.
 */
function takeSql(c: Conn, n: number, capped: boolean, returning = true): string {
  const [least, greatest] = isSqlite(c) ? ['min', 'max'] : ['least', 'greatest'];
  const now = refilled(least, greatest);
  // Typed for Postgres, where a SELECT's parameters carry no column's type as VALUES of an INSERT do.
  const rows = Array.from({ length: n }, () =>
    capped
      ? '(CAST(? AS varchar(160)), CAST(? AS double precision), CAST(? AS bigint), CAST(? AS double precision), CAST(? AS double precision))'
      : '(?, ?, ?, ?, ?)',
  ).join(', ');
  const source = capped
    ? `SELECT * FROM (VALUES ${rows}) AS v
         WHERE (SELECT COALESCE(SUM(queued), 0) FROM queue_turns WHERE account_id = ? AND lane IN ('local', 'remote')) < ?`
    : `VALUES ${rows}`;
  return `INSERT INTO rate_buckets (id, tokens, at_ms, rate, burst) ${source}
       ON CONFLICT (id) DO UPDATE SET tokens = ${now} - 1, at_ms = ${greatest}(rate_buckets.at_ms, excluded.at_ms), rate = excluded.rate, burst = excluded.burst
       WHERE ${now} >= 1${returning ? '\n       RETURNING id' : ''}`;
}

const take = (n: number, capped: boolean) =>
  statement.write<{ id: string }>(`rate-buckets-take:${n}${capped ? ':capped' : ''}`, (c, ...v) => c.raw(takeSql(c, n, capped), v));

/** What a refused `guardTokens` says (engine/query.ts `guardRefusal`). */
const NO_RATE = 'request rate';

// Postgres: the take as a condition of the submission's commit (`guardTokens`): every bucket
// gives its token or the statement fails (gemforge_guard, migration 011), and with it the commit.
// `last`, queued after the hold's guards and before the job's insert: the rows of one account are
// locked in one order, balance rows, then buckets, then its queue turn (balances.ts "Locking").
const guard = (n: number, capped: boolean) =>
  statement.later(
    `rate-buckets-guard:${n}${capped ? ':capped' : ''}`,
    (c, ...v) => c.raw(`WITH taken AS (${takeSql(c, n, capped)}) SELECT gemforge_guard(count(*) = ${n}, '${NO_RATE}') FROM taken`, v),
    { last: true },
  );

const read = (n: number) =>
  statement.rows<{ id: string; tokens: number; at_ms: number; rate: number; burst: number }>(`rate-buckets-read:${n}`, (c, ...ids) =>
    c('rate_buckets').whereIn('id', ids).select('id', 'tokens', 'at_ms', 'rate', 'burst'),
  );

/** What a take binds: per bucket its id, a new bucket's tokens (full, less this request's token), the time, rate and burst; then the cap's. */
function takeParams(buckets: readonly Bucket[], nowMs: number, capped: { accountId: string; cap: number } | undefined): Value[] {
  const params: Value[] = bucketTakes(buckets, nowMs).flatMap((t) => [t.id, t.tokens, t.at_ms, t.rate, t.burst]);
  if (capped) params.push(capped.accountId, capped.cap);
  return params;
}

/**
 * Whether `guardTokens` can take the tokens with a transaction's commit here:
 * Postgres only. SQLite's single writer would gain nothing (its take is already
 * one statement, and the transaction holds the one write lock either way).
 */
export const tokensGuardable = (db: Conn): boolean => !isSqlite(db);

/**
 * Postgres: takes one token from each bucket as `trx` commits, in the batch sent
 * with its COMMIT (engine/pg-deferred.ts), so the bucket rows are locked only
 * while Postgres runs that batch, and the submission makes one commit instead of
 * two. When any bucket has no token (or, `capped`, the account is at its cap),
 * the commit fails with the refusal of `gemforge_guard` (this file's
 * `isRateRefused`) and takes nothing: the caller then takes the tokens on their
 * own (`takeTokens`), which spends the buckets that had one and says which
 * refused. false on SQLite (`tokensGuardable`), where nothing is queued.
 */
export async function guardTokens(trx: Conn, buckets: readonly Bucket[], nowMs: number, capped?: { accountId: string; cap: number }): Promise<boolean> {
  if (!tokensGuardable(trx) || buckets.length === 0) return false;
  await query(trx, guard(buckets.length, !!capped), takeParams(buckets, nowMs, capped));
  return true;
}

/**
 * The tokens a procedure takes in its own statement, as `guardTokens` would take them with a commit
 * (storage/procedures.ts `submitMediaAtOnce`, Postgres migration 024): each bucket's row as the take inserts
 * it (its id, a new bucket's tokens, the time, rate and burst) in a JSON array, and the queued-task cap's
 * account and cap (null: none). A bucket without a token, or the account at its cap, fails the statement with
 * `isRateRefused`'s refusal and takes nothing.
 */
export interface TokensAtOnce {
  buckets: string;
  capAccountId: string | null;
  cap: number | null;
}

/** What `guardTokens` would bind, for a procedure (`TokensAtOnce`). */
export function tokensForProcedure(buckets: readonly Bucket[], nowMs: number, capped?: { accountId: string; cap: number }): TokensAtOnce {
  return { buckets: JSON.stringify(bucketTakes(buckets, nowMs)), capAccountId: capped?.accountId ?? null, cap: capped?.cap ?? null };
}

/**
 * Takes one token from each bucket at `nowMs`. Returns the buckets that had
 * none, each with the milliseconds until it holds one again (empty: admitted).
 * A bucket that had a token gives it even when another refuses: the attempt
 * counts against it (a key hammering past its rate spends its account's too).
 * With `capped`, no token is taken while the account has `cap` or more media
 * jobs queued: every bucket is then returned (the caller tells why with `queuedOf`).
 */
export async function takeTokens(
  db: Conn,
  buckets: readonly Bucket[],
  nowMs: number,
  capped?: { accountId: string; cap: number },
): Promise<Array<{ id: string; waitMs: number }>> {
  if (buckets.length === 0) return [];
  const params = takeParams(buckets, nowMs, capped);
  const given = new Set((await query(db, take(buckets.length, !!capped), params)).rows.map((r) => r.id));
  const refused = buckets.filter((b) => !given.has(b.id));
  if (refused.length === 0) return [];
  const rows = await query(
    db,
    read(refused.length),
    refused.map((b) => b.id),
  );
  const waits = new Map(
    rows.map((r) => {
      const tokens = Math.min(Number(r.burst), Number(r.tokens) + (Math.max(0, nowMs - Number(r.at_ms)) * Number(r.rate)) / 1000);
      return [r.id, Math.max(0, ((1 - tokens) / Number(r.rate)) * 1000)] as const;
    }),
  );
  // A bucket never made (refused by the cap before its first token) holds its burst: no wait of its own.
  return refused.map((b) => ({ id: b.id, waitMs: waits.get(b.id) ?? 0 }));
}

/** True when a transaction failed because `guardTokens` found a bucket without a token (or the account at its cap). */
export const isRateRefused = (error: unknown): boolean => guardRefusal(error) === NO_RATE;

/** What a refused `takeTokensAtClaim` says (engine/query.ts `guardRefusal`). */
const NO_TOKEN = 'rate bucket without a token';

/** The take of `n` buckets as a guarded write: every one must give its token (an upsert counts a row it inserted or updated). */
const takeGuarded = (n: number) =>
  statement.guarded(`rate-buckets-take-guarded:${n}`, NO_TOKEN, (c, ...v) => c.raw(takeSql(c, n, false, false), v), { rows: n });

/**
 * Whether `takeTokensAtClaim` may be used on `db`: SQLite, whose single writer holds
 * the buckets no longer for it. On Postgres the take inside a transaction would keep
 * the key's and the account's bucket rows locked until its COMMIT.
 */
export const takesAtClaim = (db: Conn): boolean => isSqlite(db);

/**
 * Takes a token from each bucket as a write of the caller's transaction that
 * waits for its next statement (on SQLite, the claim of the identity, in one
 * round trip): when a bucket has none, that statement fails with the refusal
 * `isTokenMissing` names and the transaction keeps nothing, no token either (the
 * caller then asks `takeTokens`, which says which bucket and how long to wait).
 */
export async function takeTokensAtClaim(trx: Conn, buckets: readonly Bucket[], nowMs: number): Promise<void> {
  if (buckets.length === 0) return;
  await query(trx, takeGuarded(buckets.length), takeParams(buckets, nowMs, undefined));
}

/** One bucket's take as a procedure binds it (storage/procedures.ts `submitTextAtOnce`): the values `takeParams` binds. */
export interface BucketTake {
  id: string;
  tokens: number;
  at_ms: number;
  rate: number;
  burst: number;
}

/** The takes of `buckets` at `nowMs`, as `takeTokensAtClaim` would make them: a new bucket full, less this request's token. */
export const bucketTakes = (buckets: readonly Bucket[], nowMs: number): BucketTake[] =>
  buckets.map((b) => ({ id: b.id, tokens: b.burst - 1, at_ms: nowMs, rate: b.rate, burst: b.burst }));

/** True when a transaction failed because a `takeTokensAtClaim` found a bucket without a token. */
export const isTokenMissing = (error: unknown): boolean => guardRefusal(error) === NO_TOKEN;
