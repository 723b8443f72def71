/**
 * The media worker: a short loop over the durable job queue. Runs inside the
 * server by default, or alone with `npx gemforge worker`. Each loop claims a job
 * with a lease, renews the lease while the job runs (a renewal that finds the
 * job taken stops the work), and recovers jobs whose worker died according to
 * their provider's resume policy: re-queued in their old place after a backoff,
 * or, after `max_attempts` claims, failed with the reservation released.
 */
import os from 'node:os';
import crypto from 'node:crypto';
import { inTransaction } from '../storage/db.ts';
import * as jobs from '../storage/jobs.ts';
import * as tasks from '../domain/tasks.ts';
import { sweepTemp } from '../storage/blobs.ts';
import { expireOutputs } from '../domain/retention.ts';
import type { Scenario } from '../domain/scenarios.ts';
import { finishTask } from '../domain/tasks.ts';
export { leaseTime, retryBackoffMs } from './timing.ts';
import { blobsOf, LeaseLostError, LeftForRecoveryError, runJob, type JobContext } from './run-job.ts';
import { leaseTime, retryBackoffMs } from './timing.ts';
import { providerOf, type MediaProviders, type ResumePolicy } from '../providers/media-types.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { processJobCounts, type JobCounts } from './counts.ts';

export interface WorkerOptions extends Omit<JobContext, 'stopping'> {
  concurrency: number;
  /** Loops for remote providers' jobs (I/O-bound; 0 when no model has a remote provider). */
  remoteConcurrency?: number;
  leaseMs: number;
  pollMs: number;
  /** First backoff of a re-queued job in ms; doubles per attempt, at most MAX_BACKOFF_MS (timing.ts). */
  retryBackoffMs: number;
  /** Jobs of one account running at once per lane, unless the account has its own (0: no cap; absent: none). */
  accountCaps?: jobs.AccountCaps;
}

export interface RunningWorker {
  id: string;
  stop(): Promise<void>;
}

export function startWorker(options: WorkerOptions): RunningWorker {
  // At most 40 + 1 + 7 + 1 + 6 characters: jobs.locked_by holds 64 (Postgres enforces it).
  const id = `${os.hostname().slice(0, 40)}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
  const { db, clock, logger } = options;
  let stopping = false;
  // Idle waits end as soon as the worker stops, so stop() does not wait out a poll or maintenance interval.
  let wake: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (wake = resolve));
  const idle = (ms: number) => Promise.race([sleep(ms), stopped]);
  const ctx: JobContext & { jobCounts: JobCounts } = { ...options, jobCounts: options.jobCounts ?? processJobCounts, stopping: () => stopping };
  // Each running job's signal: aborted at stop, so a read stuck on an upstream ends within the grace period.
  const jobAborts = new Set<AbortController>();
  const log = logger.child({ worker: id });

  async function runWithLease(job: jobs.JobRow): Promise<void> {
    // A renewal that finds the job no longer ours (recovered and claimed elsewhere) stops the work.
    let lost = false;
    const abort = new AbortController();
    jobAborts.add(abort);
    const beat = setInterval(
      () => {
        jobs
          .heartbeat(db, job.id, id, leaseTime(clock))
          .then((ours) => {
            if (!ours && !lost) {
              lost = true;
              abort.abort(new DOMException('lease lost', 'AbortError'));
              log.warn({ jobId: job.id, taskId: job.task_id }, 'lease lost; stopping the work on this job');
            }
          })
          .catch((err: unknown) => log.warn({ err }, 'heartbeat failed'));
      },
      Math.max(50, Math.floor(options.leaseMs / 3)),
    );
    try {
      await runJob({ ...ctx, stopping: () => stopping || lost, signal: abort.signal }, job);
      ctx.jobCounts.count('finished');
      if (stopping && !lost) await leaveOnStop(job);
    } catch (err) {
      ctx.jobCounts.count('failed');
      if (err instanceof LeaseLostError) log.warn({ jobId: job.id, taskId: job.task_id }, err.message);
      else if (err instanceof LeftForRecoveryError) log.error({ err: err.cause, store: 'database', jobId: job.id, taskId: job.task_id }, err.message);
      // A failure outside the provider (database, disk): leave the job to lease recovery.
      else log.error({ err, jobId: job.id, taskId: job.task_id }, 'job failed unexpectedly; it will be recovered when its lease expires');
    } finally {
      clearInterval(beat);
      jobAborts.delete(abort);
    }
  }

  /**
   * A job still running when the worker stops: handed back at once without
   * spending an attempt, or held for an operator when its provider cannot
   * resume it safely (the same rule as an expired lease, without the wait).
   */
  async function leaveOnStop(job: jobs.JobRow): Promise<void> {
    const policy = resumePolicyOf(options.providers, await tasks.taskOf(db, job.task_id));
    const now = clock.now().toISOString();
    if (policy === 'never') {
      if (await jobs.hold(db, job.id, id, now, 'interrupted by a worker stop; the provider cannot resume it safely'))
        log.warn({ jobId: job.id, taskId: job.task_id }, 'job held for an operator at stop');
    } else if (await jobs.handBack(db, job.id, id, now)) {
      ctx.jobCounts.count('handed back');
      log.info({ jobId: job.id, taskId: job.task_id }, 'job handed back to the queue at stop');
    }
  }

  /**
   * One lane: a single claimer keeps up to `slots` of its jobs running at once,
   * so idle capacity costs one poll per interval, not one per slot (the remote
   * lane's 64 slots wait on the network). Each claim serves the next account in
   * turn; an account at its cap is passed over, so a slot never idles while
   * another account has a due job.
   */
  async function dispatch(lane: jobs.Lane, slots: number): Promise<void> {
    const running = new Set<Promise<void>>();
    while (!stopping) {
      if (running.size >= slots) {
        await Promise.race([...running, stopped]);
        continue;
      }
      try {
        const job = await jobs.claimNext(db, id, leaseTime(clock), lane, options.accountCaps);
        if (!job) {
          await idle(options.pollMs);
          continue;
        }
        ctx.jobCounts.count('claimed');
        const run: Promise<void> = runWithLease(job).finally(() => running.delete(run));
        running.add(run);
      } catch (err) {
        log.error({ err }, 'worker loop error');
        await idle(options.pollMs * 4);
      }
    }
    await Promise.allSettled(running);
  }

  async function maintenance(): Promise<void> {
    let sweptAt = 0;
    while (!stopping) {
      try {
        await recoverExpiredLeases(options);
        await expireOutputs(options.db, options.clock, blobsOf(options));
        // Temp files a killed process left behind: at start, then hourly.
        if (Date.now() - sweptAt > 3600_000) {
          sweptAt = Date.now();
          const removed = await sweepTemp(options.dataDir);
          if (removed > 0) log.info({ removed }, 'removed temp files left by stopped processes');
        }
      } catch (err) {
        log.error({ err }, 'worker maintenance error');
      }
      await idle(Math.max(100, Math.min(options.leaseMs / 2, 5000)));
    }
  }

  // Jobs a dead worker left behind are recovered (in their old place) before the first claim.
  const recovered = recoverExpiredLeases(options).catch((err: unknown) => log.error({ err }, 'worker recovery error'));
  const remoteLoops = options.remoteConcurrency ?? 0;
  const loops = [
    recovered.then(() => dispatch('local', options.concurrency)),
    ...(remoteLoops > 0 ? [recovered.then(() => dispatch('remote', remoteLoops))] : []),
    maintenance(),
  ];
  log.info({ concurrency: options.concurrency, remoteConcurrency: remoteLoops }, 'worker started');
  return {
    id,
    async stop() {
      stopping = true;
      for (const abort of jobAborts) abort.abort(new DOMException('stopping', 'AbortError'));
      wake();
      await Promise.allSettled(loops);
    },
  };
}

/** How an interrupted job of this task may continue: its provider's policy for it (`rerun` when none is known). */
function resumePolicyOf(providers: MediaProviders, task: tasks.TaskRow | undefined): ResumePolicy {
  const provider = task && providerOf(providers, task.model, task.kind);
  if (!provider) return 'rerun';
  const scenarios = (JSON.parse(task.request) as { scenarios?: Scenario[] }).scenarios ?? [];
  return provider.resumeFor?.({ scenarios }) ?? provider.resume;
}

/**
 * Jobs whose lease expired: rerun when the provider declares that safe (in
 * their old place, after a backoff), else hold them (task stays `processing`,
 * reservation held) for an operator. A job already claimed `max_attempts` times
 * killed its worker each time: it fails, and its task settles through the one
 * settlement path (succeeded outputs charged, the rest released).
 */
export async function recoverExpiredLeases(
  options: Pick<WorkerOptions, 'db' | 'clock' | 'logger' | 'leaseMs' | 'providers' | 'retryBackoffMs' | 'jobCounts'>,
): Promise<void> {
  const { db, clock, leaseMs } = options;
  const at = leaseTime(clock);
  for (const job of await jobs.expiredLeases(db, at, leaseMs)) {
    const policy = resumePolicyOf(options.providers, await tasks.taskOf(db, job.task_id));
    const log = { jobId: job.id, taskId: job.task_id, attempts: job.attempts, maxAttempts: job.max_attempts };
    const interrupted = `interrupted after attempt ${job.attempts} of ${job.max_attempts} (worker ${job.locked_by ?? 'unknown'} stopped renewing its lease)`;
    if (policy === 'never') {
      if (await jobs.holdExpired(db, job.id, at, leaseMs, 'interrupted; the provider cannot resume it safely')) {
        (options.jobCounts ?? processJobCounts).count('recovered');
        options.logger.warn(log, 'interrupted job held for an operator (gemforge admin task settle)');
      }
    } else if (job.attempts >= job.max_attempts) {
      if (await failExhausted(options, job, at, interrupted)) {
        (options.jobCounts ?? processJobCounts).count('recovered');
        options.logger.warn(log, 'job failed: every attempt was interrupted; its reservation was released');
      }
    } else {
      const backoffMs = retryBackoffMs(job.attempts, options.retryBackoffMs);
      if (await jobs.requeueExpired(db, job.id, at, leaseMs, backoffMs, interrupted)) {
        (options.jobCounts ?? processJobCounts).count('recovered');
        options.logger.info({ ...log, policy, backoffMs }, 'interrupted job requeued in its place');
      }
    }
  }
}

/** Fails a job out of attempts and settles its task, in one transaction; false when another worker got there first. */
async function failExhausted(options: Pick<WorkerOptions, 'db' | 'clock' | 'leaseMs'>, job: jobs.JobRow, at: jobs.LeaseTime, reason: string): Promise<boolean> {
  const { db, clock } = options;
  return inTransaction(db, async (trx) => {
    if (!(await jobs.failExpired(trx, job.id, at, options.leaseMs, reason))) return false;
    const produced = (await tasks.outputsOf(trx, job.task_id)).some((o) => o.status === 'succeeded');
    const status = produced ? 'partial' : 'failed';
    const message = `The generation was interrupted ${job.attempts} times and was given up; only outputs already produced were charged.`;
    await finishTask(trx, clock, job.task_id, { status, error: { code: status === 'failed' ? 'GENERATION_FAILED' : 'PARTIAL_FAILURE', message } });
    return true;
  });
}
