/**
 * Group commit for one account's procedure calls (Postgres; storage/procedures.ts `submitMediaAtOnce`).
 *
 * One account's submissions serialize on its balance row: each holds that row's lock from its guarded
 * move to its commit, so one account's throughput is bounded by how long each call holds it, not by
 * CPU. Here, while a call of an account is in flight, the account's next calls wait; when it returns,
 * all those waiting go as one call of the batched statement (up to `MAX_BATCH`), which makes each
 * item's writes in its own subtransaction, in arrival order, under one transaction and one commit
 * (migration 025). There is no timer: a call that finds nothing in flight goes at once, alone, so a
 * quiet account waits for nothing; only calls that would have queued behind the row's lock anyway are
 * gathered.
 *
 * Each item answers exactly what its single call would: done, or the error it failed with (a guard's
 * refusal, a claim made before, anything else), rebuilt from the SQLSTATE and message the batch
 * reports for it, with nothing of it written. Should the batched call itself fail (the connection,
 * the commit), nothing of any item was kept and every item fails with that error, as each single call
 * failing would; its caller then takes its fallback path as always.
 */
import type { Conn } from './engine/query.ts';

/**
 * The most items one call carries. Each item is a subtransaction that writes, so has its own
 * subtransaction id; Postgres caches 64 of them per backend before other backends' visibility checks
 * must read pg_subtrans, so a batch stays well below that.
 */
export const MAX_BATCH = 32;

/**
 * How many calls of one account may be in flight at once. Two: while one batch holds the account's row, the
 * next is already on its way and makes its first item's writes up to that row's lock, so the row is never idle
 * for a round trip and the answers of the batch before. More would only wait on the same row.
 */
export const IN_FLIGHT = 2;

/** An error as the batched statement reported it for one item: the SQLSTATE as `code`, as node-postgres gives it. */
export class ItemError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What one item of a batch came to: undefined when written, else its SQLSTATE and message. */
export interface ItemOutcome {
  state: string | null;
  message: string | null;
}

/** How one account's calls run: one alone, several in one batched call (outcomes in the items' order). */
export interface Runner<P> {
  /** Tells this runner's accounts from another's. */
  name: string;
  one: (db: Conn, params: P) => Promise<void>;
  many: (db: Conn, params: P[]) => Promise<ItemOutcome[]>;
}

interface Waiting<P> {
  params: P;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** An account's calls: how many are in flight, and those waiting for one to return. */
interface Account {
  inFlight: number;
  waiting: Array<Waiting<unknown>>;
}

type Accounts = Map<string, Account>;

/** Per database, by runner and account (an entry while any of its calls is in flight). */
const accountsByDb = new WeakMap<object, Accounts>();

function accountsOf(db: Conn): Accounts {
  let accounts = accountsByDb.get(db);
  if (!accounts) accountsByDb.set(db, (accounts = new Map<string, Account>()));
  return accounts;
}

/** How many calls wait behind those in flight on `db` now (what a test holds calls for, to make a batch). */
export function waitingCalls(db: Conn): number {
  let count = 0;
  for (const account of accountsOf(db).values()) count += account.waiting.length;
  return count;
}

/**
 * Runs `params` for `account` with `runner`: at once, alone, when fewer than `IN_FLIGHT` calls of the account
 * are in flight; else with the calls that wait beside it, as soon as one in flight returns. Resolves when its
 * writes were made, rejects with what refused them (nothing of it written).
 */
export function coalesced<P>(db: Conn, runner: Runner<P>, account: string, params: P): Promise<void> {
  const accounts = accountsOf(db);
  const key = `${runner.name} ${account}`;
  let state = accounts.get(key);
  if (!state) accounts.set(key, (state = { inFlight: 0, waiting: [] }));
  const call = new Promise<void>((resolve, reject) => state.waiting.push({ params, resolve, reject }));
  if (state.inFlight < IN_FLIGHT) next(db, runner, accounts, key, state);
  return call;
}

/** Sends the account's waiting calls (up to MAX_BATCH) as one call; when it returns, the next, or nothing in flight. */
function next<P>(db: Conn, runner: Runner<P>, accounts: Accounts, key: string, state: Account): void {
  const batch = state.waiting.splice(0, MAX_BATCH) as Array<Waiting<P>>;
  if (batch.length === 0) {
    if (state.inFlight === 0) accounts.delete(key);
    return;
  }
  state.inFlight++;
  void send(db, runner, batch).then((settle) => {
    state.inFlight--;
    // The next batch leaves before these calls' answers are written: the database is not left idle meanwhile.
    next(db, runner, accounts, key, state);
    settle();
  });
}

/** Runs a batch; resolves (never rejects) with what settles each of its calls. */
async function send<P>(db: Conn, runner: Runner<P>, batch: Array<Waiting<P>>): Promise<() => void> {
  try {
    if (batch.length === 1) {
      await runner.one(db, batch[0]!.params);
      return () => batch[0]!.resolve();
    }
    const outcomes = await runner.many(
      db,
      batch.map((w) => w.params),
    );
    if (outcomes.length !== batch.length) throw new Error(`procedure batch: ${outcomes.length} outcomes for ${batch.length} items`);
    return () =>
      batch.forEach((w, i) => {
        const { state, message } = outcomes[i]!;
        if (state === null) w.resolve();
        else w.reject(new ItemError(state, message ?? ''));
      });
  } catch (error) {
    // Nothing of any item was kept (one statement, its own transaction): each fails as its single call would have.
    return () => batch.forEach((w) => w.reject(error));
  }
}
