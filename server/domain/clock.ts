/** Time, injectable so tests can cross UTC month boundaries deterministically. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** The UTC calendar month of a moment, as `YYYY-MM` (the spec's accounting period). */
export function utcMonth(at: Date): string {
  return at.toISOString().slice(0, 7);
}
