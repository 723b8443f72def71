/**
 * The worker's two clocks: when a lease is stamped and judged, and how long a
 * re-queued job waits. Shared by the loop (worker.ts) and a job's run
 * (run-job.ts), in their own module so neither imports the other back.
 */
import * as jobs from '../storage/jobs.ts';
import type { Clock } from '../domain/clock.ts';

const MAX_BACKOFF_MS = 60_000;

/**
 * The time this worker's leases are stamped and judged at: the database's
 * clock, since machines' clocks disagree; a clock that every worker shares (a
 * test's manual clock) is used as it is.
 */
export function leaseTime(clock: Clock): jobs.LeaseTime {
  return clock.shared ? clock.now().toISOString() : jobs.DATABASE_CLOCK;
}

/** The backoff before the next claim of a job claimed `attempts` times so far. */
export function retryBackoffMs(attempts: number, baseMs: number): number {
  return Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.max(0, attempts - 1));
}
