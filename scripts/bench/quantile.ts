/** The value at quantile q of sorted numbers (nearest rank); NaN when there are none (load.ts, latency-timeline.ts). */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
