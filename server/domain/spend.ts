/**
 * The spend path: every use case that costs Gems (media tasks, text completions,
 * video extraction) goes through here, and each money rule is written once.
 *
 *   identity     `identityOf`: (key, Idempotency-Key) bound to the operation and body
 *   quote        `tokenQuote` / `tokenCharge`: token pricing in whole Gems
 *                (media quotes are per output slot, see media-request.ts)
 *   submit       `inSubmission`: the use case's transaction, whose steps claim
 *                the identity and hold the Gems (a refusal rolls both back:
 *                nothing retained) around the use case's own writes
 *   outcome      `outcomeOf` decides, from how the work ended, one of
 *                  release          certainly no billable work: release, identity released
 *                  bill-and-retain  known usage: charge it (≤ the hold), retain the response
 *                  hold-uncertain   work may have happened, usage unknown: hold stays,
 *                                   replays answer REQUEST_UNCERTAIN
 *                and `release` / `billAndRetain` / `holdUncertain` carry it out.
 *
 * The spec's errors of this path are built here once each (REQUEST_UNCERTAIN in
 * idempotency.ts, beside the other replay answers). Use cases are adapters: they
 * bring their admission checks and their run, and call these.
 */
import { DomainError } from './errors.ts';
import { inTransaction, type Db, type Tx } from '../storage/db.ts';
import type { Principal } from './accounts.ts';
import type { Clock } from './clock.ts';
import { refusedAtCommit } from './admission.ts';
import * as idem from './idempotency.ts';
import * as ledger from './ledger.ts';
import * as procedures from '../storage/procedures.ts';
import type { Purpose, ReservationRow, SpendKind } from './ledger.ts';
import type { BucketTake } from '../storage/rate-buckets.ts';

export { requestUncertain } from './idempotency.ts';

/** The identity of a request: the caller's key and Idempotency-Key, the operation and the body's fingerprint. */
export function identityOf(principal: Principal, idemKey: string, operation: string, body: unknown): idem.Identity {
  return { keyId: principal.key.id, accountId: principal.account.id, idemKey, operation, fingerprint: idem.fingerprint(body) };
}

// ---- Quoting tokens ------------------------------------------------------------

/** A token rate card (catalog `pricing` of text and analysis models), Gems per 1,000 tokens. */
export interface TokenRates {
  inputPerThousandTokens: number;
  outputPerThousandTokens: number;
}

export interface TokenCount {
  inputTokens: number;
  outputTokens: number;
}

/** Whole Gems for a cost; rates can be fractional, so float noise (1.0000000002) never adds a Gem. */
const ceilGems = (x: number) => Math.max(0, Math.ceil(x - 1e-9));

const tokenCost = (rates: TokenRates, t: TokenCount) =>
  ceilGems((t.inputTokens * rates.inputPerThousandTokens + t.outputTokens * rates.outputPerThousandTokens) / 1000);

/** The reservation for token work: the cost of the upper bounds, at least 1 Gem. */
export function tokenQuote(rates: TokenRates, bounds: TokenCount): number {
  return Math.max(1, tokenCost(rates, bounds));
}

/** The charge for measured usage: ceil(measured cost), never above what was reserved. */
export function tokenCharge(rates: TokenRates, usage: TokenCount, reserved: number): number {
  return Math.min(reserved, tokenCost(rates, usage));
}

// ---- Errors of the spend path -----------------------------------------------------

/**
 * 503 PROVIDER_UNAVAILABLE: before anything is claimed, or after the provider
 * answered "not now" and the claim was withdrawn (`forgotten`): both leave the
 * identity free, so the spec's "keep the identity and back off" works; or after
 * a release that closed the identity.
 */
export function providerUnavailable(provider: string, when: 'before-claim' | 'forgotten' | 'released', retryAfterSeconds?: number): DomainError {
  const message = {
    'before-claim': `The ${provider} is unavailable; nothing was claimed. Retry later with the same Idempotency-Key.`,
    forgotten: `The ${provider} is unavailable and did nothing; nothing was charged. Retry later with the same Idempotency-Key.`,
    released: `The ${provider} is unavailable; nothing was charged. This identity is closed: a replay answers REQUEST_FAILED.`,
  }[when];
  return new DomainError('PROVIDER_UNAVAILABLE', message, { ...(retryAfterSeconds !== undefined && { retryAfterSeconds }) });
}

/** 502 PROVIDER_ERROR after a release: the provider rejected the request. Final: a retry of the identity only answers REQUEST_FAILED. */
export function providerRejected(provider: string, detail?: string): DomainError {
  return new DomainError(
    'PROVIDER_ERROR',
    `${detail ?? `The ${provider} rejected the request.`} Nothing was charged. This identity is closed: a replay answers REQUEST_FAILED.`,
    { final: true },
  );
}

// ---- Reserving ---------------------------------------------------------------------

export interface Hold {
  purpose: Purpose;
  /** What it pays for, as the usage view counts it (absent: as ledger.ts `ReserveRequest` says). */
  kind?: SpendKind | undefined;
  /** Whole Gems: the media quote or the token quote. */
  amount: number;
  maxGems?: number | undefined;
  /** What it pays for (completion id, extraction id). */
  ref?: string;
  /** The reservation's id, made up front: the claimed record names it. */
  id: string;
}

/**
 * The steps of a submission's transaction, bound to it (`inSubmission`). The use
 * case runs them in its own order, with its own writes between: claim, hold,
 * then whatever makes the work durable (media: the task and its job).
 */
export interface Submission {
  /** The transaction, for the use case's own writes. */
  readonly trx: Tx;
  /** True in the attempt whose hold is decided as it commits (the first); false the long way. */
  readonly atCommit: boolean;
  /**
   * Claims the identity (idempotency.ts `claimIn`), its record written in the
   * state the use case decided before the transaction: the first write, so a
   * claim made before ends the transaction here and is replayed.
   */
  claim: (outcome: idem.ClaimOutcome) => Promise<void>;
  /**
   * Holds the Gems (ledger.ts `reserveTx`); the spec's refusals (402, 409
   * PRICE_CHANGED) throw and roll everything back, the claim included, so
   * nothing is retained. Its reservation is the one the claim names.
   */
  hold: (hold: Hold) => Promise<ReservationRow>;
}

/**
 * Runs a submission's transaction: `story` claims, holds and makes its work
 * durable through the `Submission` steps, and whatever it throws rolls all of
 * it back. Returns the story's value (created), or, when the identity was
 * claimed before (the claim's insert fails on its primary key), that claim's
 * record to replay, or its replay error. A media hold is first decided as the
 * transaction commits (Postgres: no lock held across a round trip); when that
 * refuses it nothing was kept, and the story runs again the long way, which
 * says which rule refused.
 *
 * `admit`: the request's admission, when the story decides it with the first
 * attempt's commit (admission.ts `admitAtCommit`). Should that attempt not
 * commit (refused at the commit, a replay, any failure), nothing of it was taken,
 * so `admit` runs on its own before anything else is answered, as it would have
 * before the transaction: its refusal is the answer, and the request is counted.
 *
 * `atOnce`: the same writes as one statement of the database (storage/procedures.ts),
 * tried before the transaction where the database has one (it answers undefined
 * where it has none, having done nothing). It makes all of them or none, deciding
 * the hold, and with `admit` the admission's tokens, as the first attempt does at
 * its commit, so its failure is taken as that attempt's: a refused hold or rate
 * runs `admit` on its own and then the story step by step, a claim made before is
 * replayed (after `admit`), and anything else runs the story as if `atOnce` had not
 * been tried (its first attempt then takes the tokens at its commit).
 */
export async function inSubmission<T>(
  db: Db,
  clock: Clock,
  identity: idem.Identity,
  story: (submission: Submission) => Promise<T>,
  admit?: () => Promise<void>,
  atOnce?: () => Promise<T | undefined>,
): Promise<idem.SubmitResult<T>> {
  const attempt = async (atCommit: boolean): Promise<idem.SubmitResult<T>> => ({
    created: true,
    value: await inTransaction(db, (trx) => story(steps(trx, clock, identity, atCommit))),
  });
  const refused = (error: unknown) => ledger.holdRefusedAtCommit(error) || refusedAtCommit(error);
  const whole =
    atOnce &&
    (async (): Promise<idem.SubmitResult<T> | undefined> => {
      try {
        const value = await atOnce();
        return value === undefined ? undefined : { created: true, value };
      } catch (error) {
        if (refused(error) || idem.claimedBefore(error)) throw error;
        return undefined; // nothing was written: the transaction as always
      }
    });
  try {
    return await atCommitElseStepByStep(attempt, refused, admit, whole);
  } catch (error) {
    if (!idem.claimedBefore(error)) throw error;
    return idem.replayOfClaimed(db, identity);
  }
}

/**
 * Runs `attempt(true)`, whose checks the database makes as the transaction commits; when one refused
 * (`refused`), nothing of it was kept, and `attempt(false)` runs it again step by step, which says what it was.
 * `first`: what the first attempt would have decided at its commit, run on its own after any failure of it.
 * `atOnce`: the first attempt made as one statement instead, where it can be (undefined: it was not, nothing done).
 */
async function atCommitElseStepByStep<T>(
  attempt: (atCommit: boolean) => Promise<T>,
  refused: (error: unknown) => boolean,
  first?: () => Promise<void>,
  atOnce?: () => Promise<T | undefined>,
): Promise<T> {
  try {
    return (await atOnce?.()) ?? (await attempt(true));
  } catch (error) {
    await first?.();
    if (!refused(error)) throw error;
    return attempt(false);
  }
}

/**
 * A text submission's admission, claim and hold as one statement of the database (storage/procedures.ts
 * `submitTextAtOnce`, SQLite): the tokens of `tokens` taken, the identity claimed with `outcome`, and the LLM hold
 * split between the allowance and paid Gems by the rules of ledger.ts `reserveTx`, decided by the database from the
 * same figures. The hold as made (its split read back from the statement), or undefined when nothing was made: where
 * the database has no such statement, for a hold over `maxGems` (refused after the claim, so a claim made before
 * replays first), and on any failure of the statement (a bucket without a token, a claim made before, a rule
 * refusing, anything else), which leaves nothing written: the caller then runs its transaction as it always did,
 * which answers as it always did.
 */
export async function claimedAndHeldAtOnce(
  db: Db,
  clock: Clock,
  identity: idem.Identity,
  outcome: idem.ClaimOutcome,
  hold: Hold,
  tokens: BucketTake[],
): Promise<ledger.HeldReservation | undefined> {
  if ((outcome.reservationId ?? undefined) !== hold.id) throw new Error('spend: the claimed record must name the reservation made up front');
  const rows = ledger.llmHoldAtOnce(clock, { ...hold, accountId: identity.accountId, keyId: identity.keyId });
  if (!rows) return undefined;
  try {
    const record = idem.claimRecord(clock, identity, outcome);
    const split = await procedures.submitTextAtOnce(db, { buckets: tokens, record, ...rows });
    return split && { ...rows.reservation, ...split };
  } catch {
    return undefined; // nothing was written: the transaction, which says what it was
  }
}

/** The steps of one attempt of a submission's transaction; they refuse to run out of order. */
function steps(trx: Tx, clock: Clock, identity: idem.Identity, atCommit: boolean): Submission {
  let claimed: idem.ClaimOutcome | undefined;
  return {
    trx,
    atCommit,
    async claim(outcome) {
      if (claimed) throw new Error('spend: a submission claims its identity once');
      claimed = outcome;
      await idem.claimIn(trx, clock, identity, outcome);
    },
    async hold(hold) {
      if (!claimed) throw new Error('spend: a submission claims its identity before it holds Gems');
      if ((claimed.reservationId ?? undefined) !== hold.id) throw new Error('spend: the claimed record must name the reservation made up front');
      return ledger.reserveTx(trx, clock, {
        accountId: identity.accountId,
        keyId: identity.keyId,
        purpose: hold.purpose,
        kind: hold.kind,
        amount: hold.amount,
        maxGems: hold.maxGems,
        ref: hold.ref,
        id: hold.id,
        atCommit,
      });
    },
  };
}

/** A claimed identity with its reservation: what the outcome functions need. */
export interface Claim {
  identity: idem.Identity;
  reservationId: string;
  reserved: number;
  /** The response's id, recorded on the identity. */
  ref: string;
  /** The reservation as the hold made it, when the use case kept it: settling then skips reading it back. */
  held?: ledger.HeldReservation;
}

// ---- Outcomes --------------------------------------------------------------------------

/** How a provider run ended without a result (providers' failure classes). */
export type Failure = 'refused' | 'failed' | 'uncertain';
export type Outcome = 'release' | 'bill-and-retain' | 'hold-uncertain';

/**
 * The money and identity rule for a failed run: a refusal before any output was
 * seen is certainly no work (release); a failure with known usage is a definite,
 * billable outcome (bill and retain the error); anything else may have done work
 * whose usage is unknown (hold, uncertain).
 */
export function outcomeOf(failure: Failure, seen: { output: boolean; usage: boolean }): Outcome {
  if (failure === 'refused' && !seen.output) return 'release';
  if (failure === 'failed' && seen.usage) return 'bill-and-retain';
  return 'hold-uncertain';
}

/*
 * Every outcome takes the identity's record before the hold's reservation (and the
 * reservation before the balance rows, ledger.ts `settleTx`), as an operator's
 * release does (idempotency.ts `operatorRelease`): two transactions on one identity
 * then wait for each other instead of deadlocking.
 */

/** Release: nothing charged, the whole hold returns, replays answer REQUEST_FAILED. */
export async function release(db: Db, clock: Clock, claim: Claim): Promise<void> {
  await inTransaction(db, async (trx) => {
    await idem.markReleased(trx, clock, claim.identity);
    await ledger.releaseTx(trx, clock, claim.reservationId, claim.held);
  });
}

/** Release and withdraw the claim: nothing happened, the hold returns, the same identity may be sent again. */
export async function releaseAndForget(db: Db, clock: Clock, claim: Claim): Promise<void> {
  await inTransaction(db, async (trx) => {
    await idem.forget(trx, claim.identity);
    await ledger.releaseTx(trx, clock, claim.reservationId, claim.held);
  });
}

/**
 * Bill and retain: charge (≤ the hold, the rest released) and retain the response for replays, in one transaction.
 * The record's completion comes first, then the hold's close: each must change its one row (the record still
 * pending, the hold still held: a settlement happens once). First both are checked as the transaction commits, so on
 * SQLite the whole settlement, BEGIN to COMMIT, is one round trip; when either check refuses (an operator released
 * the identity meanwhile), nothing was kept and the settlement runs again step by step, each check at its
 * statement, which fails as it always did.
 *
 * Before that, where the database has one and the hold is known (`claim.held`), the same writes are made as one
 * statement (storage/procedures.ts `settleCompletionAtOnce`: prepared once, the response a bound value). Whatever
 * stops it (either guard refusing, any failure) leaves nothing written, and the settlement runs as above, which
 * answers as it always did.
 */
export async function billAndRetain(db: Db, clock: Clock, claim: Claim, charge: number, retained: idem.Retained): Promise<void> {
  if (await settledAtOnce(db, clock, claim, charge, retained)) return;
  const settle = (atCommit: boolean) =>
    inTransaction(db, async (trx) => {
      await idem.complete(trx, clock, claim.identity, { ref: claim.ref, retained }, atCommit);
      await ledger.settleTx(trx, clock, claim.reservationId, charge, claim.held, atCommit);
    });
  await atCommitElseStepByStep(settle, (error) => idem.completedAtCommitRefused(error) || ledger.closedAtCommitRefused(error));
}

/** `billAndRetain`'s writes as one statement: true once made; false where there is none, or it failed (nothing written). */
async function settledAtOnce(db: Db, clock: Clock, claim: Claim, charge: number, retained: idem.Retained): Promise<boolean> {
  if (claim.held?.id !== claim.reservationId) return false; // the hold's amounts would need a read: the transaction reads them
  try {
    const record = { key_id: claim.identity.keyId, idem_key: claim.identity.idemKey, ...idem.completion(clock, { ref: claim.ref, retained }) };
    const { closing, entries, movement } = ledger.settlementRows(clock, claim.held, charge);
    return await procedures.settleCompletionAtOnce(db, { record, reservation: { id: claim.reservationId, ...closing }, entries, movement });
  } catch {
    return false; // nothing was written: the transaction, which says what it was
  }
}

/** Hold as uncertain: the reservation stays held, replays answer REQUEST_UNCERTAIN. */
export async function holdUncertain(db: Db, clock: Clock, claim: Claim): Promise<void> {
  await idem.markUncertain(db, clock, claim.identity);
}
