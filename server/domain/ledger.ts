/**
 * The Gem ledger: the one module with the spec's money rules, so Gems change hands in one place.
 *
 *   reserve  → holds Gems before dispatch (checks maxGems, key cap, balance or
 *              LLM allowance + consented paid Gems)
 *   settle   → posts a charge ≤ the reservation once, releases the rest
 *   release  → voids the whole reservation (nothing charged)
 *
 * Every movement is an append-only `ledger_entries` row and, in the same
 * transaction, a movement of the running figures (storage/balances.ts), which are
 * what admission reads: a constant number of rows whatever the history. Reserve
 * and credit lock the account's and key's balance rows (Postgres) or hold
 * SQLite's single writer, so no interleaving can take a balance, an allowance or
 * a key cap past its limit.
 */
import { DomainError } from './errors.ts';
import { inTransaction, type Db, type Tx } from '../storage/db.ts';
import * as store from '../storage/ledger.ts';
import type { EntryRow, Purpose, ReservationRow, SpendKind } from '../storage/ledger.ts';
import * as balances from '../storage/balances.ts';
import { newId } from './ids.ts';
import { utcMonth, type Clock } from './clock.ts';

export type { Purpose, ReservationRow, SpendKind };

export interface ReserveRequest {
  accountId: string;
  keyId: string | null;
  /** `media` spends the Gem balance; `llm` spends the LLM allowance, then consented paid Gems. */
  purpose: Purpose;
  /** What it pays for, the usage view's figure its charge moves; absent: image (media) or text (llm). */
  kind?: SpendKind | undefined;
  /** Whole Gems: the media quote, or the text/extraction conservative maximum. */
  amount: number;
  /** The request's own ceiling; above it → 409 PRICE_CHANGED, nothing reserved. */
  maxGems?: number | undefined;
  ref?: string | undefined;
  /** The reservation's id when the caller made it up front (media records it on the identity at once). */
  id?: string | undefined;
  /**
   * Let the database decide a media hold as the transaction commits (Postgres,
   * balances.ts `guardHold`): a refusal then fails the commit (`holdRefusedAtCommit`)
   * with nothing kept, and the caller runs the transaction again without this to
   * learn which rule refused it.
   */
  atCommit?: boolean;
}

/** What settling needs of a reservation, as `reserveTx` returned it. */
export type HeldReservation = Pick<ReservationRow, 'id' | 'account_id' | 'key_id' | 'kind' | 'hold_allowance' | 'hold_paid' | 'state'>;

export interface Settlement {
  charged: number;
  released: number;
}

const gems = (n: number) => `${n} Gem${n === 1 ? '' : 's'}`;

function assertWhole(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${what} must be a non-negative whole number of Gems, got ${n}`);
}

/**
 * Reserves `amount` Gems, or throws the spec's error naming the limit hit and
 * the amount needed: 409 PRICE_CHANGED, 402 API_KEY_LIMIT, 402 INSUFFICIENT_GEMS
 * (media balance), 402 LLM_QUOTA_EXHAUSTED (allowance and paid-Gem consent).
 */
export async function reserve(db: Db, clock: Clock, req: ReserveRequest): Promise<ReservationRow> {
  return inTransaction(db, (trx) => reserveTx(trx, clock, req));
}

/** `reserve` inside a caller's transaction, so a claim, a reservation and a task commit together. */
export async function reserveTx(trx: Tx, clock: Clock, req: ReserveRequest): Promise<ReservationRow> {
  assertWhole(req.amount, 'amount');
  if (aboveMaxGems(req)) {
    throw new DomainError(
      'PRICE_CHANGED',
      `This request costs up to ${gems(req.amount)}, above its maxGems ceiling of ${req.maxGems}. Reduce the cost or raise maxGems to at least ${req.amount}.`,
    );
  }
  const now = clock.now();
  const month = utcMonth(now);
  if (req.atCommit && req.purpose === 'media' && (await balances.guardHold(trx, { accountId: req.accountId, keyId: req.keyId, month, paid: req.amount }))) {
    return recordHold(trx, req, paidHold(req, now));
  }
  const figures = await balances.lockFigures(trx, req.accountId, req.keyId, month);
  if (!figures) throw new Error(`reserve: unknown account ${req.accountId} or key ${req.keyId}`);
  const { balance } = figures;

  if (figures.keyCap !== null) {
    const cap = figures.keyCap;
    if (cap === 0) {
      throw new DomainError('API_KEY_LIMIT', `This API key's monthly Gem cap is 0, which disables spending; this request needs ${gems(req.amount)}.`);
    }
    const spent = figures.keySpent;
    if (spent + req.amount > cap) {
      throw new DomainError(
        'API_KEY_LIMIT',
        `This API key's monthly cap of ${gems(cap)} cannot cover this request: ${gems(spent)} are already charged this UTC month or held, and this request needs ${gems(req.amount)} (${gems(cap - spent)} left). The cap is not raised automatically.`,
      );
    }
  }

  let holdAllowance = 0;
  let holdPaid = 0;
  if (req.purpose === 'media') {
    if (balance < req.amount) {
      throw new DomainError('INSUFFICIENT_GEMS', `The account's Gem balance of ${gems(balance)} cannot cover this request, which needs ${gems(req.amount)}.`);
    }
    holdPaid = req.amount;
  } else {
    const left = Math.max(0, figures.llmAllowance - figures.allowanceUsed);
    holdAllowance = Math.min(left, req.amount);
    holdPaid = req.amount - holdAllowance;
    if (holdPaid > 0 && !figures.paidConsent) {
      throw new DomainError(
        'LLM_QUOTA_EXHAUSTED',
        `The account's monthly LLM allowance has ${gems(left)} left and this request needs up to ${gems(req.amount)}; paid Gems are not used because the account has not consented to paid LLM usage.`,
      );
    }
    if (holdPaid > balance) {
      throw new DomainError(
        'LLM_QUOTA_EXHAUSTED',
        `This request needs up to ${gems(req.amount)}: the monthly LLM allowance has ${gems(left)} left and the Gem balance of ${gems(balance)} cannot cover the remaining ${gems(holdPaid)}.`,
      );
    }
  }

  const row = await recordHold(trx, req, { now, month, holdAllowance, holdPaid });
  // The figures were read above in this transaction: the moves go with its next statement.
  await balances.move(trx, { accountId: row.account_id, keyId: row.key_id, month, paidPending: holdPaid, allowancePending: holdAllowance }, true);
  return row;
}

/** True when a transaction failed because the hold decided at its commit was refused (`ReserveRequest.atCommit`). */
export const holdRefusedAtCommit = balances.isHoldRefused;

const aboveMaxGems = (req: ReserveRequest) => req.maxGems !== undefined && req.amount > req.maxGems;

/** The rows a hold inserts: its reservation and its hold entry. */
export interface HoldRows {
  reservation: ReservationRow;
  entry: EntryRow;
}

/**
 * The rows of a media hold of paid Gems decided by the database as it writes them, with the claim and the task in
 * one statement (tasks.ts `submitMedia`, storage/procedures.ts), as `reserveTx` makes them with `atCommit`: the
 * balance and the key's cap are the statement's guards. Undefined when the hold must go step by step: it is over
 * `maxGems`, which `reserveTx` refuses after the claim (a claim made before is replayed first).
 */
export function mediaHoldAtOnce(clock: Clock, req: ReserveRequest): HoldRows | undefined {
  assertWhole(req.amount, 'amount');
  if (req.purpose !== 'media' || aboveMaxGems(req)) return undefined;
  return holdRows(req, paidHold(req, clock.now()));
}

/** The rows of an LLM hold but its split (which the database decides as it writes them), and the whole amount. */
export interface LlmHoldRows {
  reservation: Omit<ReservationRow, 'hold_allowance' | 'hold_paid'>;
  entry: Omit<EntryRow, 'allowance' | 'paid'>;
  amount: number;
}

/**
 * The rows of an LLM hold whose split the database decides as it writes them, with the claim and the admission's
 * tokens in one statement (text.ts `submit`, storage/procedures.ts `submitTextAtOnce`, which splits as `reserveTx`
 * does). Undefined when the hold must go step by step: it is over `maxGems`, which `reserveTx` refuses after the claim
 * (a claim made before is replayed first).
 */
export function llmHoldAtOnce(clock: Clock, req: ReserveRequest): LlmHoldRows | undefined {
  assertWhole(req.amount, 'amount');
  if (req.purpose !== 'llm' || aboveMaxGems(req)) return undefined;
  const now = clock.now();
  const { reservation, entry } = holdRows(req, { now, month: utcMonth(now), holdAllowance: 0, holdPaid: 0 });
  const { hold_allowance: _a, hold_paid: _p, ...unsplit } = reservation;
  const { allowance: _ea, paid: _ep, ...entryUnsplit } = entry;
  return { reservation: unsplit, entry: entryUnsplit, amount: req.amount };
}

/** A media hold decided by the database's guards: all of it paid Gems (media spends no LLM allowance). */
const paidHold = (req: ReserveRequest, now: Date): HoldAmounts => ({ now, month: utcMonth(now), holdAllowance: 0, holdPaid: req.amount });

/** The reservation and its hold entry (the balance moves are the caller's). */
async function recordHold(trx: Tx, req: ReserveRequest, amounts: HoldAmounts): Promise<ReservationRow> {
  const { reservation, entry } = holdRows(req, amounts);
  await store.insertReservation(trx, reservation);
  await store.insertEntry(trx, entry);
  return reservation;
}

interface HoldAmounts {
  now: Date;
  month: string;
  holdAllowance: number;
  holdPaid: number;
}

/** The rows a hold inserts: its reservation, and the hold entry. */
function holdRows(req: ReserveRequest, { now, month, holdAllowance, holdPaid }: HoldAmounts): HoldRows {
  const row: ReservationRow = {
    id: req.id ?? newId('rsv'),
    account_id: req.accountId,
    key_id: req.keyId,
    purpose: req.purpose,
    kind: req.kind ?? (req.purpose === 'media' ? 'image' : 'text'),
    ref: req.ref ?? null,
    hold_allowance: holdAllowance,
    hold_paid: holdPaid,
    state: 'held',
    charged: 0,
    released: 0,
    month,
    created_at: now.toISOString(),
    settled_at: null,
  };
  const entry: EntryRow = {
    account_id: row.account_id,
    key_id: row.key_id,
    reservation_id: row.id,
    type: 'hold',
    allowance: holdAllowance,
    paid: holdPaid,
    month,
    created_at: row.created_at,
    note: null,
  };
  return { reservation: row, entry };
}

/**
 * Settles a held reservation once: charges `charge` (clamped to the reservation,
 * allowance part first) and releases the rest. Returns what was charged and released.
 * Throws when the reservation is not held any more (settlement happens once).
 */
export async function settle(db: Db, clock: Clock, reservationId: string, charge: number): Promise<Settlement> {
  return inTransaction(db, (trx) => settleTx(trx, clock, reservationId, charge));
}

/** Releases a held reservation entirely: nothing is charged. */
export async function release(db: Db, clock: Clock, reservationId: string): Promise<Settlement> {
  return inTransaction(db, (trx) => releaseTx(trx, clock, reservationId));
}

/** `release` inside a caller's transaction. */
export async function releaseTx(trx: Tx, clock: Clock, reservationId: string, held?: HeldReservation): Promise<Settlement> {
  return settleTx(trx, clock, reservationId, 0, held);
}

/**
 * `settle` inside a caller's transaction, so a task or an identity and its money
 * move together: the one settlement path (production and tests alike).
 */
export async function settleTx(trx: Tx, clock: Clock, reservationId: string, charge: number, held?: HeldReservation, atCommit = false): Promise<Settlement> {
  // A hold's amounts never change once made: the caller that made it need not read them back (one round trip less);
  // the close below, only of a held reservation, still makes the settlement happen once.
  const r = held?.id === reservationId ? held : await store.findReservation(trx, reservationId);
  if (!r) throw new Error(`settle: unknown reservation ${reservationId}`);
  const { closing, entries, movement, settlement } = settlementRows(clock, r, charge);
  // At the commit (SQLite): the close waits with everything below for the COMMIT, one round trip, and a
  // reservation no longer held fails it there (`closedAtCommitRefused`); the caller then settles again without.
  if (atCommit) await store.closeReservationAtCommit(trx, r.id, closing);
  else if (!(await store.closeReservation(trx, r.id, closing))) throw new Error(`settle: reservation ${reservationId} was closed concurrently`);
  await store.insertEntry(trx, entries);
  // The hold made and moved these balance rows, and the close above proved it held: the moves need no check
  // of their own and leave together with the caller's next statement (a settlement's one batch, not six round trips).
  await balances.move(trx, movement, true);
  return settlement;
}

/** What a settlement writes: the reservation's close, its entries (post and void, or void alone) and the balances' movement. */
export interface SettlementRows {
  closing: { state: 'settled' | 'released'; charged: number; released: number; settled_at: string };
  entries: EntryRow[];
  movement: balances.Movement;
  settlement: Settlement;
}

/**
 * The rows of the settlement of held reservation `r` charging `charge` (clamped to it, allowance part first, the rest
 * released): what `settleTx` writes, and a settlement made at once (spend.ts `billAndRetain`, storage/procedures.ts).
 */
export function settlementRows(clock: Clock, r: HeldReservation, charge: number): SettlementRows {
  assertWhole(charge, 'charge');
  if (r.state !== 'held') throw new Error(`settle: reservation ${r.id} is already ${r.state}`);
  const total = r.hold_allowance + r.hold_paid;
  const charged = Math.min(charge, total);
  const postAllowance = Math.min(charged, r.hold_allowance);
  const postPaid = charged - postAllowance;
  const now = clock.now();
  const month = utcMonth(now);
  const at = now.toISOString();
  const closing = { state: charged > 0 ? ('settled' as const) : ('released' as const), charged, released: total - charged, settled_at: at };
  const base = { account_id: r.account_id, key_id: r.key_id, reservation_id: r.id, month, created_at: at, note: null };
  const voided: EntryRow = { ...base, type: 'void', allowance: r.hold_allowance - postAllowance, paid: r.hold_paid - postPaid };
  const entries: EntryRow[] = charged > 0 ? [{ ...base, type: 'post', allowance: postAllowance, paid: postPaid }, voided] : [voided];
  const movement: balances.Movement = {
    accountId: r.account_id,
    keyId: r.key_id,
    month,
    day: at.slice(0, 10),
    kind: r.kind,
    paidPending: -r.hold_paid,
    allowancePending: -r.hold_allowance,
    paidPosted: postPaid,
    allowancePosted: postAllowance,
  };
  return { closing, entries, movement, settlement: { charged, released: total - charged } };
}

/** True when a transaction failed because a `settleTx(…, atCommit)` found its reservation no longer held. */
export const closedAtCommitRefused = store.isReservationClosed;

/** Adds (or with a negative amount, removes) paid Gems; never below zero. */
export async function credit(db: Db, clock: Clock, accountId: string, amount: number, note: string): Promise<number> {
  if (!Number.isSafeInteger(amount)) throw new Error('credit must be a whole number of Gems');
  return adjust(db, clock, accountId, () => amount, note);
}

/** Sets the paid balance to `target` with one correcting credit row. */
export async function setBalance(db: Db, clock: Clock, accountId: string, target: number): Promise<number> {
  return adjust(db, clock, accountId, (balance) => target - balance, 'admin: set balance');
}

/**
 * One credit row of `amountFor(balance)`, computed under the account lock so a
 * reservation committing meanwhile cannot make "set the balance to N" miss N.
 */
async function adjust(db: Db, clock: Clock, accountId: string, amountFor: (balance: number) => number, note: string): Promise<number> {
  return inTransaction(db, async (trx) => {
    const balance = await balances.lockBalance(trx, accountId);
    const amount = amountFor(balance);
    if (balance + amount < 0) throw new Error(`the balance of ${balance} cannot go below zero`);
    if (amount !== 0) {
      const now = clock.now();
      await store.insertEntry(trx, {
        account_id: accountId,
        key_id: null,
        reservation_id: null,
        type: 'credit',
        allowance: 0,
        paid: amount,
        month: utcMonth(now),
        created_at: now.toISOString(),
        note,
      });
      await balances.move(trx, { accountId, keyId: null, month: utcMonth(now), credited: amount });
    }
    return balance + amount;
  });
}

/** The account's paid Gem balance, read from its running figures. */
export async function balanceOf(db: Db, accountId: string): Promise<number> {
  return (await balances.accountBalance(db, accountId, '')).balance;
}

/** The money picture of an account in the current UTC month (for `admin account show`). */
export async function accountSummary(db: Db, clock: Clock, accountId: string, keyIds: string[]) {
  const month = utcMonth(clock.now());
  const held = await store.outstanding(db, { account_id: accountId });
  const keys: Record<string, number> = {};
  for (const id of keyIds) keys[id] = await balances.keySpent(db, id, month);
  const figures = await balances.accountBalance(db, accountId, month);
  return {
    month,
    balance: figures.balance,
    llmAllowanceUsed: figures.allowanceUsed,
    outstandingReservations: { count: held.count, gems: held.allowance + held.paid, allowance: held.allowance, paid: held.paid },
    keySpendThisMonth: keys,
  };
}
