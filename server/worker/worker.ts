/**
 * The media worker: a short loop over the durable job queue. Runs inside the
 * server by default, or alone with `npx gemforge worker`. Each loop claims a job
 * with a lease, renews the lease while the job runs, and recovers jobs whose
 * worker died according to their provider's resume policy.
 */
import os from 'node:os';
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import type { Db } from '../storage/db.ts';
import { inTransaction } from '../storage/db.ts';
import * as jobs from '../storage/jobs.ts';
import * as tasks from '../storage/tasks.ts';
import { markAssetDeleted } from '../storage/assets.ts';
import { blobPath } from '../storage/blobs.ts';
import { MEDIA_SCENARIOS } from '../domain/media-request.ts';
import { findScenario, type Scenario } from '../domain/scenarios.ts';
import { runJob, type JobContext } from './run-job.ts';

export interface WorkerOptions extends Omit<JobContext, 'stopping'> {
  concurrency: number;
  leaseMs: number;
  pollMs: number;
}

export interface RunningWorker {
  id: string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function startWorker(options: WorkerOptions): RunningWorker {
  // At most 40 + 1 + 7 + 1 + 6 characters: jobs.locked_by holds 64 (Postgres enforces it).
  const id = `${os.hostname().slice(0, 40)}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
  const { db, clock, logger } = options;
  let stopping = false;
  const ctx: JobContext = { ...options, stopping: () => stopping };
  const log = logger.child({ worker: id });

  async function runWithLease(job: jobs.JobRow): Promise<void> {
    const beat = setInterval(() => {
      jobs.heartbeat(db, job.id, id, clock.now().toISOString()).catch((err: unknown) => log.warn({ err }, 'heartbeat failed'));
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    try {
      await runJob(ctx, job);
    } catch (err) {
      // A failure outside the provider (database, disk): leave the job to lease recovery.
      log.error({ err, jobId: job.id, taskId: job.task_id }, 'job failed unexpectedly; it will be recovered when its lease expires');
    } finally {
      clearInterval(beat);
    }
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      try {
        const job = await jobs.claimNext(db, id, clock.now().toISOString());
        if (job) await runWithLease(job);
        else await sleep(options.pollMs);
      } catch (err) {
        log.error({ err }, 'worker loop error');
        await sleep(options.pollMs * 4);
      }
    }
  }

  async function maintenance(): Promise<void> {
    while (!stopping) {
      try {
        await recoverExpiredLeases(options);
        await expireOutputs(options);
      } catch (err) {
        log.error({ err }, 'worker maintenance error');
      }
      await sleep(Math.max(100, Math.min(options.leaseMs / 2, 5000)));
    }
  }

  const loops = [...Array.from({ length: options.concurrency }, loop), maintenance()];
  log.info({ concurrency: options.concurrency }, 'worker started');
  return {
    id,
    async stop() {
      stopping = true;
      await Promise.allSettled(loops);
    },
  };
}

/**
 * Jobs whose lease expired: rerun when the provider declares that safe, else
 * hold them (task stays `processing`, reservation held) for an operator.
 */
export async function recoverExpiredLeases(options: Pick<WorkerOptions, 'db' | 'clock' | 'logger' | 'leaseMs' | 'providers'>): Promise<void> {
  const { db, clock } = options;
  const now = clock.now();
  const cutoff = new Date(now.getTime() - options.leaseMs).toISOString();
  for (const job of await jobs.expiredLeases(db, cutoff)) {
    const task = await tasks.findTask(db, job.task_id);
    const scenarios = task ? ((JSON.parse(task.request) as { scenarios?: Scenario[] }).scenarios ?? []) : [];
    const policy = findScenario(scenarios, MEDIA_SCENARIOS.unresumable) ? 'never' : (task && options.providers[task.kind]?.resume) ?? 'rerun';
    if (policy === 'never') {
      if (await jobs.holdExpired(db, job.id, cutoff, now.toISOString(), 'interrupted; the provider cannot resume it safely')) {
        options.logger.warn({ jobId: job.id, taskId: job.task_id }, 'interrupted job held for an operator (gemforge admin task settle)');
      }
    } else if (await jobs.requeueExpired(db, job.id, cutoff, now.toISOString())) {
      options.logger.info({ jobId: job.id, taskId: job.task_id, policy }, 'interrupted job requeued');
    }
  }
}

/** Deletes outputs past their retention: the output shows `expired` with no asset, the bytes go. */
export async function expireOutputs(options: Pick<WorkerOptions, 'db' | 'clock' | 'dataDir'>): Promise<number> {
  const { db, clock } = options;
  const nowIso = clock.now().toISOString();
  const expired = await tasks.expiredOutputs(db, nowIso, 100);
  for (const o of expired) {
    await inTransaction(db, async (trx) => {
      await markAssetDeleted(trx, o.asset_id!, nowIso);
      await tasks.updateOutput(trx, o.task_id, o.idx, { status: 'expired' });
    });
    if (!(await tasks.blobInUse(db, o.blob_sha256))) await fsp.rm(blobPath(options.dataDir, o.blob_sha256), { force: true });
  }
  return expired.length;
}
