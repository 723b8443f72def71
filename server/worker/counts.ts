/**
 * What one worker did with jobs since it started, for the worker's /metrics
 * (`gemforge_worker_jobs_total`): claimed; finished (the run ended: settled,
 * held or left as the worker stopped); failed (the run broke off on an error
 * outside the provider, or lost its lease: lease recovery takes the job
 * again); handed back (at a stop, or after a store failed); recovered from an
 * expired lease (requeued, held or failed out of attempts). Passed to the
 * worker (its context's `jobCounts`) and to the worker's metrics.
 */
export type JobEvent = 'claimed' | 'finished' | 'failed' | 'handed back' | 'recovered';

export class JobCounts {
  readonly counts = new Map<JobEvent, number>();

  count(event: JobEvent): void {
    this.counts.set(event, (this.counts.get(event) ?? 0) + 1);
  }
}

/**
 * The process's counts, which every worker of the process adds to unless given
 * its own: the metric is "jobs of this worker process" (a server's own worker
 * and a `gemforge worker` in one process count together, as tests read them).
 */
export const processJobCounts = new JobCounts();
