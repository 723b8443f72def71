/** Time, injectable so tests can cross UTC month boundaries deterministically. */
export interface Clock {
  now(): Date;
  /**
   * True for a clock every process of a deployment reads alike (a test's manual
   * clock, standing in for the database's). Job leases are stamped and judged by
   * such a clock; never by a process's own clock, which may be skewed on its
   * machine: those use the database's clock (storage/jobs.ts `leaseTime`).
   */
  readonly shared?: boolean;
}

export const systemClock: Clock = { now: () => new Date() };

/** The UTC calendar month of a moment, as `YYYY-MM` (the spec's accounting period). */
export function utcMonth(at: Date): string {
  return at.toISOString().slice(0, 7);
}
