/**
 * Admission limits, decided before anything is claimed or reserved: request
 * rates per API key and per account (media and text submissions apart, token
 * buckets in the database so every API instance holds the same limit), and a
 * cap on an account's queued media tasks. A refusal is the spec's overload
 * answer, 503 TEMPORARILY_UNAVAILABLE with Retry-After (the seconds until the
 * limit frees a slot): the identity was not claimed, so the same request with
 * the same Idempotency-Key succeeds when sent again later.
 */
import { DomainError } from './errors.ts';
import type { Db, Tx } from '../storage/db.ts';
import * as jobs from '../storage/jobs.ts';
import {
  bucketTakes,
  guardTokens,
  isRateRefused,
  isTokenMissing,
  takeTokens,
  takeTokensAtClaim,
  takesAtClaim,
  tokensForProcedure,
  tokensGuardable,
  type Bucket,
  type BucketTake,
  type TokensAtOnce,
} from '../storage/rate-buckets.ts';
import type { Principal } from './accounts.ts';
import type { Clock } from './clock.ts';

/** What a submission is counted as: media tasks, or text (chat completions and extractions). */
export type AdmissionKind = 'media' | 'text';

/** The configured limits (config.ts); a rate or cap of 0 is off. */
export interface AdmissionLimits {
  rates: { keyMedia: number; keyText: number; accountMedia: number; accountText: number; burstSeconds: number };
  /** Queued media tasks per account, unless the account has its own (`accounts.queued_tasks`). */
  accountQueuedTasks: number;
  /** Where refusals are counted for /metrics (one per app, server.ts); absent: not counted. */
  refusals?: AdmissionRefusals;
}

/** The wait asked of a client refused by the queued-task cap: a slot frees when one of its tasks starts, which no rate predicts. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 5;

/** Refusals since start, by "limit kind" (limit: `key-rate`, `account-rate`, `queued-tasks`): /metrics. */
export class AdmissionRefusals {
  readonly counts = new Map<string, number>();

  count(limit: string, kind: AdmissionKind): void {
    const key = `${limit} ${kind}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

function refused(limits: AdmissionLimits, limit: string, kind: AdmissionKind, message: string, waitSeconds: number): DomainError {
  limits.refusals?.count(limit, kind);
  return new DomainError(
    'TEMPORARILY_UNAVAILABLE',
    `${message}; nothing was claimed or reserved. Send the same request (same Idempotency-Key) again after Retry-After seconds.`,
    {
      retryAfterSeconds: Math.max(1, Math.ceil(waitSeconds)),
    },
  );
}

/** The buckets a submission of `kind` by `principal` takes a token from. */
function bucketsOf(limits: AdmissionLimits, principal: Principal, kind: AdmissionKind): Bucket[] {
  const { rates } = limits;
  const [keyRate, accountRate] = kind === 'media' ? [rates.keyMedia, rates.accountMedia] : [rates.keyText, rates.accountText];
  const out: Bucket[] = [];
  if (keyRate > 0) out.push({ id: `key:${principal.key.id}:${kind}`, rate: keyRate, burst: Math.max(1, keyRate * rates.burstSeconds) });
  if (accountRate > 0) out.push({ id: `account:${principal.account.id}:${kind}`, rate: accountRate, burst: Math.max(1, accountRate * rates.burstSeconds) });
  return out;
}

/** The account's cap on queued media tasks: its own, else the configured one (0: none). */
export function queuedTasksCap(limits: Pick<AdmissionLimits, 'accountQueuedTasks'>, account: { queued_tasks?: number | null }): number {
  return account.queued_tasks ?? limits.accountQueuedTasks;
}

/** The cap on queued media tasks (as `capped`, absent when none) and the buckets a submission is decided on. */
function limitsFor(limits: AdmissionLimits, principal: Principal, kind: AdmissionKind) {
  const cap = kind === 'media' ? queuedTasksCap(limits, principal.account) : 0;
  return { cap, buckets: bucketsOf(limits, principal, kind), capped: cap > 0 ? { accountId: principal.account.id, cap } : undefined };
}

/**
 * Whether this submission's admission can be decided with its commit
 * (`admitAtCommit`): on Postgres, when it has a rate to take a token from. The
 * caller then skips `admit` before its transaction, and runs `admit` when the
 * transaction did not commit (spend.ts `inSubmission`), so the request is still
 * counted and refused as `admit` alone would: a key's token is spent when the
 * account's bucket refuses, a refusal at the cap spends none, a replay is counted.
 */
export function admittedAtCommit(db: Db, limits: AdmissionLimits, principal: Principal, kind: AdmissionKind): boolean {
  return tokensGuardable(db) && bucketsOf(limits, principal, kind).length > 0;
}

/**
 * Takes the submission's tokens as `trx` commits (rate-buckets.ts `guardTokens`),
 * under the queued-task cap as `admit` does: the bucket rows are locked only
 * while Postgres runs the COMMIT's batch, and the submission makes one commit
 * instead of two. When a bucket has no token or the account is at its cap, the
 * commit fails (`refusedAtCommit`) with nothing kept; `admit` then says why.
 * Only where `admittedAtCommit` said so.
 */
export async function admitAtCommit(trx: Tx, clock: Clock, limits: AdmissionLimits, principal: Principal, kind: AdmissionKind): Promise<void> {
  const { buckets, capped } = limitsFor(limits, principal, kind);
  if (!(await guardTokens(trx, buckets, clock.now().getTime(), capped))) throw new Error('admission: not decidable at the commit here (admittedAtCommit)');
}

/**
 * The tokens `admitAtCommit` would take, for a submission whose writes are one statement (tasks.ts
 * `submitMedia`, storage/procedures.ts): taken by that statement, or refused by it with `refusedAtCommit`'s
 * refusal and nothing kept. Only where `admittedAtCommit` said so.
 */
export function tokensWithSubmission(clock: Clock, limits: AdmissionLimits, principal: Principal, kind: AdmissionKind): TokensAtOnce {
  const { buckets, capped } = limitsFor(limits, principal, kind);
  return tokensForProcedure(buckets, clock.now().getTime(), capped);
}

/** True when a submission failed because `admitAtCommit` found a bucket without a token or the account at its cap. */
export const refusedAtCommit = isRateRefused;

/**
 * Admits a submission or throws the 503 refusal. A refused flood spends no
 * tokens: the queued-task cap is decided first. With both a cap and rates, one
 * statement reads the account's queued tasks and takes the tokens only while
 * they are under the cap (a round trip less per submission); when it takes none,
 * the queued count is read again to tell the cap's refusal from the rates'.
 */
export async function admit(db: Db, clock: Clock, limits: AdmissionLimits, principal: Principal, kind: AdmissionKind): Promise<void> {
  const { cap, buckets, capped } = limitsFor(limits, principal, kind);
  const queueFull = () =>
    refused(limits, 'queued-tasks', kind, `This account already has ${cap} media tasks queued, its limit`, QUEUE_FULL_RETRY_AFTER_SECONDS);
  if (cap > 0 && buckets.length === 0) {
    if ((await jobs.queuedOf(db, principal.account.id)) >= cap) throw queueFull();
    return;
  }
  const over = await takeTokens(db, buckets, clock.now().getTime(), capped);
  if (over.length === 0) return;
  // None taken: the cap (then no bucket lacked a token, or the count says so), or every bucket was empty.
  if (cap > 0 && over.length === buckets.length && (over.every((o) => o.waitMs === 0) || (await jobs.queuedOf(db, principal.account.id)) >= cap)) {
    throw queueFull();
  }
  const first = over.reduce((a, b) => (b.waitMs > a.waitMs ? b : a));
  const bucket = buckets.find((b) => b.id === first.id)!;
  const whose = first.id.startsWith('key:') ? 'This API key' : 'This account';
  throw refused(
    limits,
    first.id.startsWith('key:') ? 'key-rate' : 'account-rate',
    kind,
    `${whose} is over its ${kind} request rate (${bucket.rate} per second)`,
    first.waitMs / 1000,
  );
}

/**
 * Whether a text submission on `db` may take its tokens inside its claim's
 * transaction (`admitAtClaim`): SQLite only (rate-buckets.ts `takesAtClaim`).
 */
export const admitsAtClaim = (db: Db): boolean => takesAtClaim(db);

/**
 * Admits a text submission inside its transaction, as a write that waits for
 * the claim of its identity and leaves with it (one round trip for both): the
 * take goes first in that batch, so a claim made before still fails at the
 * claim itself, and its rollback gives the token back (a replay never spends
 * one). A bucket without a token fails the claim (`refusedAtClaim`) with
 * nothing kept; the caller then runs the step-by-step way, `admit` before its
 * claim, which says which limit and how long to wait (or admits, a token
 * having come since). No queued-task cap: text has none.
 */
export async function admitAtClaim(trx: Tx, clock: Clock, limits: AdmissionLimits, principal: Principal): Promise<void> {
  await takeTokensAtClaim(trx, bucketsOf(limits, principal, 'text'), clock.now().getTime());
}

/**
 * The takes `admitAtClaim` would make now, for a text submission made as one statement (storage/procedures.ts
 * `submitTextAtOnce`, which refuses as `admitAtClaim` does: `refusedAtClaim`); none without limits.
 */
export function tokensAtOnce(clock: Clock, limits: AdmissionLimits | undefined, principal: Principal): BucketTake[] {
  return limits ? bucketTakes(bucketsOf(limits, principal, 'text'), clock.now().getTime()) : [];
}

/** True when a submission failed because `admitAtClaim` found a bucket without a token. */
export const refusedAtClaim = isTokenMissing;

/** The caps of fair share (config.ts): jobs of one account running at once per lane. */
export interface ConcurrencyDefaults {
  accountLocalConcurrency: number;
  accountRemoteConcurrency: number;
}

/** A limit as the operator sees it: its value (0: none) and whether the account has its own. */
const setting = (own: number | null | undefined, fallback: number) => ({ value: own ?? fallback, own: own !== null && own !== undefined });

/**
 * An account's fair-share caps and admission limits, and how much of them it
 * uses now: `gemforge admin account show`.
 */
export async function limitsOf(
  db: Db,
  limits: AdmissionLimits & ConcurrencyDefaults,
  account: { id: string; local_concurrency?: number | null; remote_concurrency?: number | null; queued_tasks?: number | null },
) {
  const { rates } = limits;
  return {
    localConcurrency: setting(account.local_concurrency, limits.accountLocalConcurrency),
    remoteConcurrency: setting(account.remote_concurrency, limits.accountRemoteConcurrency),
    queuedTasks: setting(account.queued_tasks, limits.accountQueuedTasks),
    ratesPerSecond: {
      keyMedia: rates.keyMedia,
      keyText: rates.keyText,
      accountMedia: rates.accountMedia,
      accountText: rates.accountText,
      burstSeconds: rates.burstSeconds,
    },
    now: { queued: await jobs.queuedOf(db, account.id), running: await jobs.runningOf(db, account.id) },
  };
}
