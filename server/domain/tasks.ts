/**
 * Media tasks: submission (idempotent claim + reservation + task + job in one
 * transaction; on SQLite first as one statement, storage/procedures.ts, the same
 * rows) and settlement at a terminal status. The read-only view and
 * ownership checks of task reads: task-view.ts.
 */
import { admit, admitAtCommit, admittedAtCommit, tokensWithSubmission, type AdmissionLimits } from './admission.ts';
import { inTransaction, type Db, type Tx } from '../storage/db.ts';
import * as store from '../storage/tasks.ts';
import * as jobs from '../storage/jobs.ts';
import * as procedures from '../storage/procedures.ts';
import type { OutputRow, TaskRow, TaskSnapshot, TaskStatus } from '../storage/tasks.ts';
import type { TokensAtOnce } from '../storage/rate-buckets.ts';
import * as ledger from './ledger.ts';
import type { ReservationRow } from './ledger.ts';
import * as spend from './spend.ts';
import * as idem from './idempotency.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';
import type { Principal } from './accounts.ts';
import type { PreparedMedia, SubmissionProvider } from './media-request.ts';

export type { TaskRow, OutputRow };
// The read side lives in task-view.ts (one statement per read); submissions answer with it too.
export { viewTask, type TaskView } from './task-view.ts';

export const TERMINAL = store.TERMINAL;

export interface SubmitInput {
  principal: Principal;
  idemKey: string;
  operation: 'createImage' | 'createVideo' | 'createAudio';
  body: unknown;
  maxGems: number | undefined;
  prepared: PreparedMedia;
  /** The model's provider, asked before anything is claimed (media-request.ts submissionProvider). */
  provider: Pick<SubmissionProvider, 'admit' | 'dispatchOutcome'> & Partial<Pick<SubmissionProvider, 'unavailableFor'>>;
  /** The identity's record as the request reads it (once); media reads it only when an earlier step did. */
  recorded?: idem.RecordRead | undefined;
  /** Request rates and the queued-task cap (admission.ts), decided before the claim; absent: none. */
  limits?: AdmissionLimits | undefined;
}

/**
 * The speech controls' defaults as the contract states them (spec: speed 1, volume 0,
 * temperature 0.7). The validator writes them into a speech body that leaves them out.
 */
const SPEECH_DEFAULTS: ReadonlyArray<readonly [string, number]> = [
  ['speed', 1],
  ['volume', 0],
  ['temperature', 0.7],
];

/**
 * What a media identity fingerprints: the body with the spec's defaults applied: `parameters`
 * is filled with `{}` by the validator, and `referenceAssetIds: []` written out
 * is the same request as leaving it out. A speech control at its default is left out too:
 * identities claimed before the contract stated those defaults (so before the validator
 * filled them in) fingerprinted the body without them, and must replay, not conflict.
 */
function fingerprinted(body: unknown): unknown {
  const { referenceAssetIds, ...rest } = body as { referenceAssetIds?: unknown[]; operation?: string; parameters?: Record<string, unknown> };
  const out = Array.isArray(referenceAssetIds) && referenceAssetIds.length === 0 ? rest : { ...rest, referenceAssetIds };
  if ((out.operation !== 'speech' && out.operation !== 'voice_clone') || !out.parameters) return out;
  const parameters = { ...out.parameters };
  for (const [name, value] of SPEECH_DEFAULTS) if (parameters[name] === value) delete parameters[name];
  return { ...out, parameters };
}

/** A submission's result: the task, and for new work what was written (the answer needs no read). */
export type Submitted = { created: true; task: TaskRow; written: TaskSnapshot } | { created: false; task: TaskRow; written?: undefined };

/**
 * Submits prepared media work exactly once per identity. New work → the queued
 * task (created: true); an exact replay → the existing task (created: false).
 */
export async function submitMedia(db: Db, clock: Clock, input: SubmitInput): Promise<Submitted> {
  const { principal, prepared, provider } = input;
  const identity = spend.identityOf(principal, input.idemKey, input.operation, fingerprinted(input.body));
  if (!provider.admit()) {
    // Decided before anything is claimed: nothing retained, the identity may be retried.
    throw spend.providerUnavailable('generation provider', 'before-claim', provider.unavailableFor?.());
  }
  // An earlier step of this request read the record (moderation: was it claimed?): replay from that read.
  const earlier = input.recorded?.asked ? await idem.lookup(db, identity, input.recorded) : undefined;
  if (earlier) return replayOf(db, earlier);
  const { limits } = input;
  // Postgres takes the rate's tokens with the submission's commit (admission.ts `admitAtCommit`): one commit, not two.
  const atCommit = limits !== undefined && admittedAtCommit(db, limits, principal, 'media');
  const admitApart = limits && (() => admit(db, clock, limits, principal, 'media'));
  if (admitApart && !atCommit) await admitApart();
  const uncertain = provider.dispatchOutcome() === 'lost';
  const quote = prepared.outputPrices.reduce((a, b) => a + b, 0);
  // The outcome is known before the transaction, so the claim writes the identity's record in it at once.
  const reservationId = newId('rsv');
  const taskId = newId('task');
  // No lookup first: a new submission is the common case, and a replay's claim fails
  // on the identity's primary key before anything is held, then replays the record.
  const outcome: idem.ClaimOutcome = uncertain ? { state: 'uncertain', reservationId } : { state: 'completed', ref: taskId, reservationId };
  const holding: spend.Hold = { purpose: 'media', kind: prepared.kind, amount: quote, maxGems: input.maxGems, id: reservationId };
  const result = await spend.inSubmission(
    db,
    clock,
    identity,
    async (submission) => {
      const { trx, claim, hold } = submission;
      // Uncertain: dispatched, then the outcome was lost; the reservation stays held, no task is visible.
      await claim(outcome);
      const reservation = await hold(holding);
      // After the hold's guards, before the job's insert: the account's rows in their lock order (balances.ts "Locking").
      if (atCommit && submission.atCommit) await admitAtCommit(trx, clock, limits, principal, 'media');
      return uncertain ? undefined : createTask(trx, clock, principal, prepared, reservation, taskId);
    },
    atCommit ? admitApart : undefined,
    // The same writes as one statement, the admission's tokens with them when they would go with the commit (Postgres).
    uncertain
      ? undefined
      : () =>
          createdAtOnce(
            db,
            clock,
            identity,
            principal,
            prepared,
            outcome,
            holding,
            taskId,
            atCommit ? tokensWithSubmission(clock, limits, principal, 'media') : undefined,
          ),
  );
  if (result.created) {
    if (!result.value) throw spend.requestUncertain();
    return { created: true, task: result.value.task, written: result.value.snapshot };
  }
  return replayOf(db, result.record);
}

/** A replay: the task of the completed identity (none: its outcome was lost). */
async function replayOf(db: Db, record: idem.IdempotencyRow): Promise<Submitted> {
  const task = record.ref ? await store.findTask(db, record.ref) : undefined;
  if (!task) throw spend.requestUncertain();
  return { created: false, task };
}

/**
 * The submission's claim, hold and task with its job in one statement (storage/procedures.ts), the rows built as the
 * step-by-step path builds them, and `tokens`, the admission's take, when the first attempt would take them with its
 * commit; undefined where it cannot be (a quote over maxGems, refused after the claim).
 */
async function createdAtOnce(
  db: Db,
  clock: Clock,
  identity: idem.Identity,
  principal: Principal,
  prepared: PreparedMedia,
  outcome: idem.ClaimOutcome,
  holding: spend.Hold,
  taskId: string,
  tokens: TokensAtOnce | undefined,
): Promise<Created | undefined> {
  const record = idem.claimRecord(clock, identity, outcome);
  const hold = ledger.mediaHoldAtOnce(clock, { ...holding, accountId: identity.accountId, keyId: identity.keyId });
  if (!hold) return undefined;
  const { task, outputs, job, snapshot } = taskRows(clock, principal, prepared, hold.reservation, taskId);
  return (await procedures.submitMediaAtOnce(db, { record, ...hold, task, outputs, job }, tokens)) ? { task, snapshot } : undefined;
}

interface Created {
  task: TaskRow;
  snapshot: TaskSnapshot;
}

/** Inserts the queued task, its pending outputs and its job; returns the task and its snapshot as written. */
async function createTask(trx: Tx, clock: Clock, principal: Principal, prepared: PreparedMedia, reservation: ReservationRow, id: string): Promise<Created> {
  const { task, outputs, job, snapshot } = taskRows(clock, principal, prepared, reservation, id);
  await store.insertTask(trx, task, outputs);
  await jobs.insertJob(trx, job);
  return { task, snapshot };
}

/** The rows of a new queued task: the task, its pending outputs and its job; and its snapshot as written. */
function taskRows(clock: Clock, principal: Principal, prepared: PreparedMedia, reservation: ReservationRow, id: string) {
  const now = clock.now().toISOString();
  const task: TaskRow = {
    id,
    account_id: principal.account.id,
    key_id: principal.key.id,
    kind: prepared.kind,
    model: prepared.model.id,
    request: JSON.stringify({ ...prepared.request, scenarios: prepared.scenarios }),
    status: 'queued',
    reservation_id: reservation.id,
    error_code: null,
    error_message: null,
    created_at: now,
    updated_at: now,
    finished_at: null,
  };
  const outputs: OutputRow[] = prepared.outputPrices.map((price, idx) => ({ task_id: task.id, idx, status: 'pending', price, asset_id: null, error: null }));
  const job = jobs.queuedJob(task.id, task.account_id, now, prepared.lane ?? 'local');
  const snapshot: TaskSnapshot = {
    task,
    reservation: { hold: reservation.hold_allowance + reservation.hold_paid, charged: 0, released: 0 },
    outputs: outputs.map((o) => ({ idx: o.idx, status: o.status, asset: undefined })),
  };
  return { task, outputs, job, snapshot };
}

// ---- The task's life cycle in the worker (task state changes only here, so its rules are in one place) ----

/** The task a job runs, or undefined when it is gone. */
export async function taskOf(db: Db | Tx, taskId: string): Promise<TaskRow | undefined> {
  return store.findTask(db, taskId);
}

/** The task's output slots, in order. */
export async function outputsOf(db: Db | Tx, taskId: string): Promise<OutputRow[]> {
  return store.findOutputs(db, taskId);
}

/** A worker starts the task: queued → processing, and every unfinished slot with it. */
export async function startProcessing(db: Db, clock: Clock, taskId: string): Promise<void> {
  await store.transitionTask(db, taskId, ['queued'], { status: 'processing', updated_at: clock.now().toISOString() });
  await store.updateUnfinishedOutputs(db, taskId, { status: 'processing' });
}

/** A slot's output is stored: it names its asset (in the transaction that records the asset). */
export async function outputSucceeded(trx: Tx, taskId: string, idx: number, assetId: string): Promise<void> {
  await store.updateOutput(trx, taskId, idx, { status: 'succeeded', asset_id: assetId, error: null });
}

/** A slot could not be made; `error` is what the client may read. */
export async function outputFailed(db: Db, taskId: string, idx: number, error: string): Promise<void> {
  await store.updateOutput(db, taskId, idx, { status: 'failed', error });
}

/** Up to `limit` stored outputs past their retention at `nowIso`, with their blobs. */
export async function outputsPastRetention(db: Db, nowIso: string, limit: number) {
  return store.expiredOutputs(db, nowIso, limit);
}

/** A stored output past its retention shows `expired` (its asset is marked deleted in the same transaction). */
export async function outputExpired(trx: Tx, taskId: string, idx: number): Promise<void> {
  await store.updateOutput(trx, taskId, idx, { status: 'expired' });
}

export interface Finish {
  status: Extract<TaskStatus, 'succeeded' | 'partial' | 'failed' | 'cancelled'>;
  error?: { code: string; message: string } | null;
  /** Override the charge (operator settlement); default: the prices of succeeded outputs. */
  charge?: number;
}

/**
 * Moves a task to a terminal status and settles its reservation in the same
 * transaction: charge the succeeded outputs, release the rest. Runs once: a
 * task already terminal is left alone (returns false).
 */
export async function finishTask(trx: Tx, clock: Clock, taskId: string, finish: Finish): Promise<boolean> {
  const task = await store.findTask(trx, taskId);
  if (!task || TERMINAL.has(task.status)) return false;
  const now = clock.now().toISOString();
  await store.updateUnfinishedOutputs(trx, taskId, { status: 'failed', error: finish.error?.message ?? 'not produced' });
  const outputs = await store.findOutputs(trx, taskId);
  const charge = finish.charge ?? outputs.filter((o) => o.status === 'succeeded').reduce((sum, o) => sum + o.price, 0);
  const moved = await store.transitionTask(trx, taskId, ['queued', 'processing'], {
    status: finish.status,
    error_code: finish.error?.code ?? null,
    error_message: finish.error?.message ?? null,
    updated_at: now,
    finished_at: now,
  });
  if (!moved) return false;
  await ledger.settleTx(trx, clock, task.reservation_id, charge);
  return true;
}

/** The terminal status the succeeded outputs imply. */
export function statusFromOutputs(outputs: OutputRow[]): Finish['status'] {
  const ok = outputs.filter((o) => o.status === 'succeeded').length;
  return ok === outputs.length ? 'succeeded' : ok > 0 ? 'partial' : 'failed';
}

/**
 * `gemforge admin task settle ID --failed|--succeeded`: an operator settles a
 * task whose outcome the worker could not know (job held, reservation held).
 */
export async function operatorSettle(db: Db, clock: Clock, taskId: string, outcome: 'failed' | 'succeeded'): Promise<TaskRow> {
  await inTransaction(db, async (trx) => {
    const task = await store.findTask(trx, taskId);
    if (!task) throw new Error(`no task with id ${taskId}`);
    if (TERMINAL.has(task.status)) throw new Error(`task ${taskId} is already ${task.status}`);
    const done = await finishTask(
      trx,
      clock,
      taskId,
      outcome === 'failed'
        ? { status: 'failed', error: { code: 'GENERATION_FAILED', message: 'The generation failed; nothing was charged.' } }
        : { status: 'succeeded', charge: await store.sumOutputPrices(trx, taskId) },
    );
    if (!done) throw new Error(`task ${taskId} could not be settled`);
    const job = await jobs.findJobByTask(trx, taskId);
    if (job) await jobs.setState(trx, job.id, 'done', clock.now().toISOString(), `settled by operator: ${outcome}`);
  });
  return (await store.findTask(db, taskId))!;
}

/** Ledger-verify check: every terminal task settled exactly its reservation; open tasks still hold theirs. */
export async function verifyTasks(db: Db): Promise<string[]> {
  const problems: string[] = [];
  for (const t of await store.tasksWithMoney(db)) {
    if (TERMINAL.has(t.status)) {
      if (t.rstate === 'held') problems.push(`task ${t.id}: ${t.status} but its reservation is still held`);
      else if (t.charged + t.released !== t.hold) problems.push(`task ${t.id}: charged ${t.charged} + released ${t.released} ≠ quoted ${t.hold}`);
    } else if (t.rstate !== 'held') {
      problems.push(`task ${t.id}: ${t.status} but its reservation is already ${t.rstate}`);
    }
  }
  return problems;
}
