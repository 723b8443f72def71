/**
 * Exactly-once submission (spec "Idempotency rules"): the one module that
 * decides what a request with an Idempotency-Key may do.
 *
 * An identity is (API key, Idempotency-Key). It binds the operation and a
 * canonical fingerprint of the validated body. Its record moves
 *   (none) → pending → completed | released | uncertain
 * or is created directly as completed when the outcome is decided inside the
 * claiming transaction (media: the task row is the durable outcome).
 *
 * The transaction is the use case's (spend.ts `inSubmission`); this module gives
 * its steps: the replay rules (`lookup`, on a record a request reads once:
 * `RecordRead`), the claim (`claimIn`, the transaction's first write) and the
 * record's later states. Admission failures (422, 402, PRICE_CHANGED,
 * REFERENCES_PROCESSING, a 503 before dispatch) throw inside that transaction,
 * so the claim rolls back with the reservation and nothing is retained.
 */
import crypto from 'node:crypto';
import { DomainError, isDomainCode } from './errors.ts';
import { inTransaction, isUniqueViolation, type Db, type Tx } from '../storage/db.ts';
import * as store from '../storage/idempotency.ts';
import type { IdempotencyRow, RecordState } from '../storage/idempotency.ts';
import { findReservation } from '../storage/ledger.ts';
import type { Clock } from './clock.ts';
import { releaseTx } from './ledger.ts';

export type { IdempotencyRow, RecordState };

export interface Identity {
  keyId: string;
  accountId: string;
  idemKey: string;
  /** The contract's operationId: one identity never serves two operations. */
  operation: string;
  /** `fingerprint(body)` of the validated body (defaults applied). */
  fingerprint: string;
}

/** Canonical JSON: keys sorted at every depth, so key order never changes a fingerprint. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function fingerprint(body: unknown): string {
  return crypto.createHash('sha256').update(canonicalJson(body)).digest('hex');
}

const conflict = () =>
  new DomainError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request body or operation. Use a new key for a new request.');
/**
 * 409 REQUEST_UNCERTAIN, the one place it is built: the request with this
 * identity is still pending, or its outcome is unknown and its reservation held.
 */
export const requestUncertain = () =>
  new DomainError(
    'REQUEST_UNCERTAIN',
    'The outcome of the request with this Idempotency-Key is not known yet (still running, or unknown with its reservation held). Keep the same key and body and check again later with backoff; it will not be dispatched again.',
  );
const failed = () =>
  new DomainError(
    'REQUEST_FAILED',
    'The original request with this Idempotency-Key definitively failed and nothing was charged. A new attempt needs a new Idempotency-Key.',
  );

/**
 * Applies the replay rules to the identity's record (`store.findRecord`, or a
 * read the request made already: `recorded`): a different body or operation →
 * IDEMPOTENCY_CONFLICT; pending/uncertain → REQUEST_UNCERTAIN; released →
 * REQUEST_FAILED; completed → the record (the caller replays it); none →
 * undefined (the caller may claim it).
 */
export async function lookup(db: Db | Tx, id: Identity, recorded?: RecordRead): Promise<IdempotencyRow | undefined> {
  const row = recorded ? await recorded.get() : await store.findRecord(db, id.keyId, id.idemKey);
  if (!row) return undefined;
  if (row.operation !== id.operation || row.fingerprint !== id.fingerprint) throw conflict();
  if (row.state === 'pending' || row.state === 'uncertain') throw requestUncertain();
  if (row.state === 'released') throw failed();
  return row;
}

/**
 * The record of one identity (key, Idempotency-Key), read at most once for its
 * request: the policy step asks whether it was claimed, the use case replays
 * before today's checks, and both get the one read.
 */
export class RecordRead {
  private read: Promise<IdempotencyRow | undefined> | undefined;
  constructor(
    private readonly db: Db,
    private readonly keyId: string,
    private readonly idemKey: string,
  ) {}

  /** The record, read at the first call. */
  get(): Promise<IdempotencyRow | undefined> {
    return (this.read ??= store.findRecord(this.db, this.keyId, this.idemKey));
  }

  /** Whether the request has read it already (media skips a read of its own, but not one made anyway). */
  get asked(): boolean {
    return this.read !== undefined;
  }
}

export interface ClaimOutcome {
  state: 'pending' | 'completed' | 'uncertain';
  ref?: string | null;
  reservationId?: string | null;
  responseStatus?: number | null;
  responseBody?: string | null;
}

export type SubmitResult<T> = { created: true; value: T } | { created: false; record: IdempotencyRow };

/**
 * The claim, a step of the submission's transaction (spend.ts `inSubmission`):
 * inserts the identity's record, already in the state its use case decided
 * before the transaction (media: completed with its task, or uncertain; text and
 * extraction: pending until their outcome). It is the transaction's first
 * write, so the primary key makes a concurrent or earlier claim of this
 * identity fail here (`claimedBefore`), before anything is held.
 */
export async function claimIn(trx: Tx, clock: Clock, id: Identity, outcome: ClaimOutcome): Promise<void> {
  await store.insertRecord(trx, claimRecord(clock, id, outcome));
}

/** The record a claim inserts: the identity, in the state its use case decided (also a submission made at once, tasks.ts). */
export function claimRecord(clock: Clock, id: Identity, outcome: ClaimOutcome): IdempotencyRow {
  const now = clock.now().toISOString();
  return {
    key_id: id.keyId,
    idem_key: id.idemKey,
    account_id: id.accountId,
    operation: id.operation,
    fingerprint: id.fingerprint,
    created_at: now,
    updated_at: now,
    ...recordOf(outcome),
  };
}

/** Whether a submission failed because its identity was claimed before its own claim (`claimIn`). */
export const claimedBefore = (error: unknown): boolean => isUniqueViolation(error);

/**
 * What a submission whose claim failed (`claimedBefore`) answers: the record of
 * the claim made before it, to replay, or its replay error. A fresh read: the
 * request's earlier one, if any, saw no record.
 */
export async function replayOfClaimed(db: Db, id: Identity): Promise<SubmitResult<never>> {
  const record = await lookup(db, id);
  if (!record) throw requestUncertain(); // claimed and gone again (an operator's cleanup): not ours to guess
  return { created: false, record };
}

/** The record's columns for an outcome. */
function recordOf(outcome: ClaimOutcome): Pick<IdempotencyRow, 'state' | 'ref' | 'reservation_id' | 'response_status' | 'response_body'> {
  return {
    state: outcome.state,
    ref: outcome.ref ?? null,
    reservation_id: outcome.reservationId ?? null,
    response_status: outcome.responseStatus ?? null,
    response_body: outcome.responseBody ?? null,
  };
}

/**
 * The retained response of a completed identity (text, extraction): the saved
 * body, or, when the outcome was a billed failure (PROVIDER_ERROR,
 * ANALYSIS_FAILED), that error again, marked final so SDKs do not retry it. A
 * failure is kept as its code and message (`retainedFailure`); the error
 * mapping gives its status, as for the first answer. Rows written before kept
 * the status too (502, 409), which is the mapping's for their codes.
 */
export function savedResponse<T>(record: IdempotencyRow): T {
  if (!record.response_body) throw requestUncertain();
  if (record.response_status === ANSWERED) return JSON.parse(record.response_body) as T;
  const saved = JSON.parse(record.response_body) as { error: { code?: string; message: string } };
  // A code this version does not know answers as any unexpected failure does, never as a success.
  if (!isDomainCode(saved.error.code)) throw new Error(`idempotency: a retained failure with code ${String(saved.error.code)}, unknown to this version`);
  throw new DomainError(saved.error.code, saved.error.message, { final: true });
}

/** The record's `response_status` of a retained answer (200, as it was sent); a retained failure keeps its former status only for older readers (`FORMER_STATUS`). */
const ANSWERED = 200;

/** What a pending identity completes with: the use case's answer (its JSON), or a billed failure. */
export type Retained = { answer: string } | { failure: DomainError };

/**
 * The status column as versions before the one error vocabulary read it back:
 * they replay a retained failure with the status stored in the row. Writing it
 * keeps a rollback, or an older instance beside this one during an upgrade,
 * replaying these rows as before. This version reads only the code.
 */
const FORMER_STATUS: Partial<Record<string, number>> = { PROVIDER_ERROR: 502, ANALYSIS_FAILED: 409 };

/** The columns of a retained outcome: the answer's JSON, or the failure's code and message in the Error envelope's shape. */
function retainedColumns(retained: Retained): { response_status: number | null; response_body: string } {
  if ('answer' in retained) return { response_status: ANSWERED, response_body: retained.answer };
  const { code, message } = retained.failure;
  return { response_status: FORMER_STATUS[code] ?? null, response_body: JSON.stringify({ error: { code, message } }) };
}

/**
 * Records the final response of a pending identity (text, extraction). `atCommit`: the record's move waits for the
 * transaction's COMMIT (SQLite), and a record no longer pending fails the transaction there instead
 * (`completedAtCommitRefused`): the caller then runs it again without, which says so as below.
 */
export async function complete(
  trx: Db | Tx,
  clock: Clock,
  id: Pick<Identity, 'keyId' | 'idemKey'>,
  result: { ref?: string | null; retained: Retained },
  atCommit = false,
): Promise<void> {
  const patch = completion(clock, result);
  if (atCommit) return store.transitionRecordAtCommit(trx, id.keyId, id.idemKey, ['pending'], patch);
  const ok = await store.transitionRecord(trx, id.keyId, id.idemKey, ['pending'], patch);
  if (!ok) throw new Error(`idempotency: ${id.idemKey} was not pending`);
}

/** A completed record's columns: what `complete` sets (also a settlement made at once, spend.ts `billAndRetain`). */
export function completion(clock: Clock, result: { ref?: string | null; retained: Retained }): CompletedColumns {
  return { state: 'completed', ref: result.ref ?? null, ...retainedColumns(result.retained), updated_at: clock.now().toISOString() };
}

export type CompletedColumns = Pick<IdempotencyRow, 'state' | 'ref' | 'response_status' | 'response_body' | 'updated_at'>;

/** True when a transaction failed because a `complete(…, atCommit)` found its record no longer pending. */
export const completedAtCommitRefused = store.isRecordMoved;

/** The work certainly did not happen and nothing was charged: replays get REQUEST_FAILED. */
export async function markReleased(trx: Db | Tx, clock: Clock, id: Pick<Identity, 'keyId' | 'idemKey'>): Promise<void> {
  await store.transitionRecord(trx, id.keyId, id.idemKey, ['pending', 'uncertain'], {
    state: 'released',
    updated_at: clock.now().toISOString(),
  });
}

/**
 * The work certainly did not start (the provider answered "not now" before any
 * output): the claim is withdrawn, so the same identity may be sent again and
 * is dispatched anew, as if it had been refused before the claim.
 */
export async function forget(trx: Db | Tx, id: Pick<Identity, 'keyId' | 'idemKey'>): Promise<void> {
  await store.deleteRecord(trx, id.keyId, id.idemKey, ['pending']);
}

/** The outcome cannot be known: replays get REQUEST_UNCERTAIN, the reservation stays held. */
export async function markUncertain(trx: Db | Tx, clock: Clock, id: Pick<Identity, 'keyId' | 'idemKey'>): Promise<void> {
  await store.transitionRecord(trx, id.keyId, id.idemKey, ['pending'], {
    state: 'uncertain',
    updated_at: clock.now().toISOString(),
  });
}

/** Identities still pending or uncertain (for operators and `ledger verify`). */
export async function unresolved(db: Db): Promise<IdempotencyRow[]> {
  return store.recordsInState(db, ['pending', 'uncertain']);
}

/** What an operator sees of an identity (`gemforge admin identity …`). */
export function describeRecord(row: IdempotencyRow) {
  return {
    keyId: row.key_id,
    idempotencyKey: row.idem_key,
    accountId: row.account_id,
    operation: row.operation,
    state: row.state,
    ref: row.ref,
    reservationId: row.reservation_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * `gemforge admin identity release KEY_ID IDEMPOTENCY_KEY`: an operator has
 * established that the work of an uncertain identity did not happen (the spec
 * has no automatic timeout release). Its held reservation is released in full
 * and every replay answers REQUEST_FAILED, so the client makes a new identity.
 * A pending identity is released only with `pending: true`, for a request the
 * operator knows is dead (its server was killed); a live request finishing
 * afterwards fails its settlement and charges nothing. An identity whose
 * reservation was already charged is refused: Gems were spent on it, so "nothing
 * happened" would be false.
 */
export async function operatorRelease(
  db: Db,
  clock: Clock,
  keyId: string,
  idemKey: string,
  options: { pending?: boolean } = {},
): Promise<{ record: IdempotencyRow; releasedGems: number }> {
  return inTransaction(db, async (trx) => {
    const row = await store.findRecord(trx, keyId, idemKey);
    if (!row) throw new Error(`no identity ${idemKey} for key ${keyId}`);
    if (row.state === 'completed' || row.state === 'released') throw new Error(`identity ${idemKey} is already ${row.state}`);
    if (row.state === 'pending' && !options.pending) {
      throw new Error(`identity ${idemKey} is pending: its request may still be running; pass --pending only when it certainly is not (its server was killed)`);
    }
    // The record first, then the reservation, as a live request's outcome takes them (spend.ts): a request
    // settling this identity meanwhile is waited for (its record then is not pending any more), never deadlocked with.
    const from: Array<'pending' | 'uncertain'> = options.pending ? ['pending', 'uncertain'] : ['uncertain'];
    if (!(await store.transitionRecord(trx, keyId, idemKey, from, { state: 'released', updated_at: clock.now().toISOString() }))) {
      throw new Error(`identity ${idemKey} changed while it was being released (its request finished meanwhile); look at it again`);
    }
    let releasedGems = 0;
    if (row.reservation_id) {
      const reservation = await findReservation(trx, row.reservation_id);
      if (reservation?.state === 'settled') {
        throw new Error(
          `identity ${idemKey}: its reservation ${reservation.id} was already charged ${reservation.charged} Gems, so it cannot be released as "nothing happened"`,
        );
      }
      if (reservation?.state === 'held') releasedGems = (await releaseTx(trx, clock, reservation.id)).released;
    }
    return { record: (await store.findRecord(trx, keyId, idemKey))!, releasedGems };
  });
}
