/**
 * Running one claimed job: the task goes `processing`, each output slot is
 * generated and stored as an asset, and the terminal status is written together
 * with the settlement (charge the succeeded outputs, release the rest).
 * Slots already stored by an earlier, interrupted run are kept, so a rerun never
 * makes or charges an output twice. Finishing checks that the job is still this
 * worker's (`locked_by`): a worker that lost its lease settles nothing.
 */
import fsp from 'node:fs/promises';
import type { Db } from '../storage/db.ts';
import { inTransaction } from '../storage/db.ts';
import * as jobs from '../storage/jobs.ts';
import type { JobRow } from '../storage/jobs.ts';
import { keepOutput, keptOutput, localBlob, localBlobs, tempPath, type Blobs } from '../storage/blobs.ts';
import { createOutputAsset, isDatabaseFailure, isDiskFailure, referenceFile, storeFailed, StoreUnavailableError } from '../domain/assets.ts';
import * as tasks from '../domain/tasks.ts';
import { finishTask, statusFromOutputs, TERMINAL, type Finish } from '../domain/tasks.ts';
import type { Scenario } from '../domain/scenarios.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../logger.ts';
import type { MediaProviders } from '../providers/media.ts';
import * as remote from '../storage/remote-calls.ts';
import { leaseTime, retryBackoffMs } from './timing.ts';
import { processJobCounts, type JobCounts } from './counts.ts';
import {
  MediaCancelledError,
  MediaGenerationError,
  MediaHoldError,
  providerOf,
  type GeneratedOutput,
  type JobRequests,
  type MediaJob,
  type MediaKind,
  type MediaTools,
  type UpstreamErrorCounter,
} from '../providers/media-types.ts';

export interface JobContext {
  db: Db;
  clock: Clock;
  logger: Logger;
  providers: MediaProviders;
  dataDir: string;
  /** The installation's blob store (server.ts builds it from the config); absent: DATA_DIR's own directory. */
  blobs?: Blobs;
  /** Where this worker counts what it did with jobs, for the worker's /metrics (absent: the process's, counts.ts). */
  jobCounts?: JobCounts;
  ffmpegPath: string;
  ffprobePath: string;
  outputRetentionSeconds: number;
  /** First backoff of a job handed back after a store failed, in ms (doubles per retry, at most a minute). */
  retryBackoffMs?: number;
  /** Hand-backs after a store failed before the slot fails (WORKER_STORE_RETRIES). */
  storeRetries?: number;
  /** Where remote providers' errors are counted for /metrics (server.ts makes the process's one). */
  upstreamErrors?: UpstreamErrorCounter;
  /** True once the worker is stopping or lost this job's lease: long waits end early, the job is left for recovery. */
  stopping(): boolean;
  /** Aborted when the worker stops or loses this job's lease (what `stopping()` reports, as a signal for reads). */
  signal?: AbortSignal;
  /** A signed link under PUBLIC_BASE_URL to an asset of the account (remote providers hand it upstream); absent without one. */
  assetLink?(accountId: string, assetId: string): Promise<string | undefined>;
}

/** The job's blob store: the one it was given, or DATA_DIR's own directory. */
export function blobsOf(ctx: Pick<JobContext, 'blobs' | 'dataDir'>): Blobs {
  return ctx.blobs ?? localBlobs(ctx.dataDir);
}

/** The job was recovered and taken by another worker meanwhile: this run settles nothing. */
export class LeaseLostError extends Error {
  constructor(job: JobRow) {
    super(`job ${job.id} (task ${job.task_id}) is no longer this worker's; its result was discarded`);
    this.name = 'LeaseLostError';
  }
}

function toolsFor(ctx: JobContext, taskId: string, accountId: string, copies: Array<() => Promise<void>>): MediaTools {
  const now = () => ctx.clock.now().toISOString();
  return {
    stopping: ctx.stopping,
    ...(ctx.signal && { signal: ctx.signal }),
    ...(ctx.upstreamErrors && { upstreamErrors: ctx.upstreamErrors }),
    warn: (details, message) => ctx.logger.warn({ taskId, ...details }, message),
    remoteCalls: {
      async find(idx) {
        const row = await remote.findRemoteCall(ctx.db, taskId, idx);
        return row && { state: row.state, upstreamId: row.upstream_id, provider: row.provider };
      },
      calling: (idx, provider) => remote.markCalling(ctx.db, taskId, idx, provider, now()),
      created: (idx, upstreamId) => remote.markCreated(ctx.db, taskId, idx, upstreamId, now()),
    },
    dataDir: ctx.dataDir,
    ffmpegPath: ctx.ffmpegPath,
    ffprobePath: ctx.ffprobePath,
    tempFile: (suffix) => tempPath(ctx.dataDir, suffix),
    blobFile: (sha256) => localBlob(blobsOf(ctx), sha256),
    ...(ctx.assetLink && { assetLink: (assetId: string) => ctx.assetLink!(accountId, assetId) }),
    async assetFile(assetId) {
      // The stored file, or a temp copy of a blob in object storage, removed when the job run ends.
      const local = await referenceFile(ctx.db, blobsOf(ctx), accountId, assetId);
      if (!local) throw new MediaGenerationError('INVALID_REFERENCE', `Reference ${assetId} is gone.`);
      copies.push(local.release);
      return local.path;
    },
  };
}

/** Hands a job to its model's provider (the model's own, else its kind's). */
function generate(providers: MediaProviders, job: MediaJob, tools: MediaTools): Promise<GeneratedOutput> {
  const provider = providerOf(providers, job.model, job.kind);
  if (!provider) throw new MediaGenerationError('WORKFLOW_UNAVAILABLE', `No ${job.kind} generator is configured on this server.`);
  return provider.generate(job, tools);
}

/**
 * How a stored output differs from what was asked (frame size; duration beyond
 * 10 %), measured from its bytes: recorded in the log, since a remote provider
 * may answer the nearest it offers.
 */
export function mismatch(
  job: object,
  asset: { width: number | null; height: number | null; duration_seconds: number | null },
): Record<string, unknown> | undefined {
  const request = job as Readonly<Record<string, unknown>>; // read by field name: each kind's request has its own fields
  const out: Record<string, unknown> = {};
  if (typeof request.width === 'number' && asset.width !== null && (asset.width !== request.width || asset.height !== request.height)) {
    out.requestedSize = `${request.width}x${request.height}`;
    out.measuredSize = `${asset.width}x${asset.height}`;
  }
  const seconds = typeof request.duration === 'number' ? request.duration : typeof request.durationSeconds === 'number' ? request.durationSeconds : undefined;
  if (seconds !== undefined && seconds > 0 && asset.duration_seconds !== null && Math.abs(asset.duration_seconds - seconds) > seconds * 0.1) {
    out.requestedSeconds = seconds;
    out.measuredSeconds = asset.duration_seconds;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Settles the task and finishes the job in one transaction, only while the job is still this worker's. */
async function settle(ctx: JobContext, job: JobRow, finish: Finish): Promise<void> {
  await inTransaction(ctx.db, async (trx) => {
    if (!(await jobs.finish(trx, job.id, job.locked_by ?? '', ctx.clock.now().toISOString()))) throw new LeaseLostError(job);
    await finishTask(trx, ctx.clock, job.task_id, finish);
  });
}

/** A store failed and handing the job back failed too (the database is down): the lease's expiry recovers the job. */
export class LeftForRecoveryError extends Error {
  constructor(job: JobRow, cause: unknown) {
    super(
      `job ${job.id} (task ${job.task_id}) could not be handed back after a store failed (${(cause as Error)?.message ?? String(cause)}); it will be recovered when its lease expires`,
      { cause },
    );
    this.name = 'LeftForRecoveryError';
  }
}

/** Runs a claimed job to a terminal task, or returns early (job left running) when the worker stops. */
export async function runJob(ctx: JobContext, job: JobRow): Promise<void> {
  const { db, clock } = ctx;
  const task = await tasks.taskOf(db, job.task_id);
  if (!task || TERMINAL.has(task.status)) {
    await jobs.finish(db, job.id, job.locked_by ?? '', clock.now().toISOString());
    return;
  }
  // The stored payload: the kind's job request as submission built it, plus the scenarios.
  const { scenarios = [], ...request } = JSON.parse(task.request) as JobRequests[typeof task.kind] & { scenarios?: Scenario[] };
  await tasks.startProcessing(db, clock, task.id);

  if (!providerOf(ctx.providers, task.model, task.kind)) {
    await settle(ctx, job, { status: 'failed', error: { code: 'WORKFLOW_UNAVAILABLE', message: `No ${task.kind} generator is configured on this server.` } });
    return;
  }
  const copies: Array<() => Promise<void>> = [];
  const tools = toolsFor(ctx, task.id, task.account_id, copies);
  try {
    await runSlots(ctx, job, task, request, scenarios, tools);
  } finally {
    // Temp copies of references kept in object storage: always removed.
    await Promise.all(copies.map((release) => release().catch(() => undefined)));
  }
}

/** Makes each unfinished output slot, then settles the task (charged for what succeeded). */
async function runSlots(
  ctx: JobContext,
  job: JobRow,
  task: tasks.TaskRow,
  request: JobRequests[MediaKind],
  scenarios: Scenario[],
  tools: MediaTools,
): Promise<void> {
  const { db, clock } = ctx;
  const slots = await tasks.outputsOf(db, task.id);
  for (const slot of slots) {
    if (slot.status === 'succeeded') continue; // stored by an earlier run
    if (ctx.stopping()) return;
    try {
      const mediaJob: MediaJob = {
        taskId: task.id,
        accountId: task.account_id,
        model: task.model,
        kind: task.kind,
        request,
        index: slot.idx,
        slots: slots.length,
        scenarios,
      };
      // An output an earlier attempt made but could not store is stored now, not made (or bought) again.
      const kept = await keptOutput(ctx.dataDir, task.id, slot.idx);
      const out: GeneratedOutput =
        kept ??
        (await generate(ctx.providers, mediaJob, tools).catch((error: unknown) => {
          // A generator that could not write its output to a full disk did its work: the disk failed, not the generation.
          throw isDiskFailure(error) ? storeFailed('local disk', 'write output', error) : error;
        }));
      if (ctx.stopping()) {
        // Stopping, or the lease was lost while generating: whoever runs the job next makes this slot (a kept output stays kept).
        if ('file' in out && !kept) await fsp.rm(out.file, { force: true });
        return;
      }
      const expiresAt = new Date(clock.now().getTime() + ctx.outputRetentionSeconds * 1000);
      let keeping = false;
      try {
        const asset = await createOutputAsset(
          db,
          clock,
          { blobs: blobsOf(ctx), ffprobePath: ctx.ffprobePath },
          {
            accountId: task.account_id,
            taskId: task.id,
            output: out,
            mimeType: out.mimeType,
            expiresAt,
            alongside: async (trx, stored) => {
              // Written only while the job is still this worker's: a recovered job's new owner makes the slot.
              if (!(await jobs.stillOurs(trx, job.id, job.locked_by ?? ''))) throw new LeaseLostError(job);
              await tasks.outputSucceeded(trx, task.id, slot.idx, stored.id);
            },
          },
        );
        const differs = mismatch(request, asset);
        if (differs)
          ctx.logger.warn(
            { taskId: task.id, slot: slot.idx, provider: providerOf(ctx.providers, task.model, task.kind)?.name, ...differs },
            'output differs from the request',
          );
      } catch (error) {
        // A store is down, not the generator: the output is kept for the attempt that stores it.
        if (error instanceof StoreUnavailableError && storeRetriesLeft(ctx, job))
          keeping = (await keepOutput(ctx.dataDir, task.id, slot.idx, out, out.mimeType)) !== undefined;
        throw error;
      } finally {
        if ('file' in out && !keeping) await fsp.rm(out.file, { force: true });
      }
    } catch (error) {
      // Stopping, or the lease was lost: whatever the provider threw, the job is left for recovery.
      if (error instanceof LeaseLostError || error instanceof LeftForRecoveryError) throw error;
      if (ctx.stopping()) return;
      if (error instanceof MediaCancelledError) {
        await settle(ctx, job, { status: 'cancelled', error: { code: 'CANCELLED', message: error.message } });
        return;
      }
      if (error instanceof MediaHoldError) {
        // The outcome upstream cannot be known: hold the task for an operator rather than pay twice.
        if (await jobs.hold(db, job.id, job.locked_by ?? '', clock.now().toISOString(), error.message)) {
          ctx.logger.warn({ taskId: task.id, slot: slot.idx, reason: error.message }, 'job held for an operator (gemforge admin task settle)');
          return;
        }
        throw new LeaseLostError(job);
      }
      if (error instanceof StoreUnavailableError && storeRetriesLeft(ctx, job)) {
        await retryLater(ctx, job, error);
        return;
      }
      if (error instanceof StoreUnavailableError) {
        // Out of store retries (WORKER_STORE_RETRIES): the slot fails, named for the store, not the generator.
        ctx.logger.error(
          { err: error.cause, store: error.store, operation: error.operation, taskId: task.id, slot: slot.idx, storeRetries: job.store_retries },
          `output could not be stored: the ${error.store} failed on every retry; the slot fails`,
        );
        await tasks.outputFailed(db, task.id, slot.idx, `The output could not be stored (the ${error.store} was unavailable); it was not charged.`);
        continue;
      }
      const safe = error instanceof MediaGenerationError ? error.message : 'This output could not be generated.';
      ctx.logger.warn({ err: error, taskId: task.id, slot: slot.idx }, 'output generation failed');
      await tasks.outputFailed(db, task.id, slot.idx, safe);
    }
  }
  try {
    const outputs = await tasks.outputsOf(db, task.id);
    const status = statusFromOutputs(outputs);
    const failedCount = outputs.filter((o) => o.status !== 'succeeded').length;
    await settle(ctx, job, {
      status,
      error:
        status === 'succeeded'
          ? null
          : status === 'partial'
            ? { code: 'PARTIAL_FAILURE', message: `${failedCount} of ${outputs.length} outputs could not be generated; they were not charged.` }
            : { code: 'GENERATION_FAILED', message: outputs.find((o) => o.error)?.error ?? 'The generation failed; nothing was charged.' },
    });
  } catch (error) {
    // The database went away mid-settlement: the transaction rolled back whole (nothing charged), every
    // stored output stays stored, so the next attempt only settles. Handed back with a backoff like any store
    // failure; out of store retries, the lease's expiry recovers it (a settlement is never turned into a failure).
    if (error instanceof LeaseLostError || !isDatabaseFailure(error) || !storeRetriesLeft(ctx, job)) throw error;
    await retryLater(ctx, job, storeFailed('database', 'settle', error));
  }
}

/** Whether a job whose store failed may still be handed back (WORKER_STORE_RETRIES) rather than fail the slot. */
function storeRetriesLeft(ctx: JobContext, job: JobRow): boolean {
  return job.store_retries < (ctx.storeRetries ?? 0);
}

/**
 * Hands the job back after a store failed: queued again after a backoff that
 * doubles per store retry, without spending an attempt. When the database is
 * the store that is down this write fails too, and the lease's expiry recovers
 * the job instead; either way the kept output is what the next attempt stores.
 */
async function retryLater(ctx: JobContext, job: JobRow, error: StoreUnavailableError): Promise<void> {
  const backoffMs = retryBackoffMs(job.store_retries + 1, ctx.retryBackoffMs ?? 1000);
  const log = {
    err: error.cause,
    store: error.store,
    operation: error.operation,
    taskId: job.task_id,
    jobId: job.id,
    storeRetries: job.store_retries + 1,
    backoffMs,
  };
  let handed: boolean;
  try {
    handed = await jobs.retryAfterStoreFailure(ctx.db, job.id, job.locked_by ?? '', leaseTime(ctx.clock), backoffMs, error.message);
  } catch (cause) {
    throw new LeftForRecoveryError(job, cause);
  }
  if (!handed) throw new LeaseLostError(job);
  (ctx.jobCounts ?? processJobCounts).count('handed back');
  ctx.logger.warn(log, `the ${error.store} failed while storing an output; the job was handed back to try again`);
}
