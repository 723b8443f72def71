/**
 * What this process's worker did with jobs since it started, for the worker's
 * /metrics (`gemforge_worker_jobs_total`): claimed; finished (the run ended:
 * settled, held or left as the worker stopped); failed (the run broke off on an
 * error outside the provider, or lost its lease: lease recovery takes the job
 * again); handed back (at a stop, or after a store failed); recovered from an
 * expired lease (requeued, held or failed out of attempts).
 */
export type JobEvent = 'claimed' | 'finished' | 'failed' | 'handed back' | 'recovered';

export const workerJobCounts = new Map<JobEvent, number>();

export function countJob(event: JobEvent): void {
  workerJobCounts.set(event, (workerJobCounts.get(event) ?? 0) + 1);
}
