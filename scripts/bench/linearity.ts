/**
 * Whether a cost grows linearly with the length of its input, judged from
 * measured rounds at several lengths (bench-moderation.ts). The judgement is
 * by cost per character: a linear cost keeps it flat (or lowers it, a fixed
 * part spread over more characters), a quadratic one multiplies it by the
 * lengths' ratio. Noise is kept out two ways:
 *
 * - each length's cost is the cheapest of its rounds: noise (another process,
 *   a garbage collection that a previous text's garbage started) only ever
 *   adds time, so the least time is the closest to the cost itself;
 * - a cost under NOISE_FLOOR_MS counts as that floor: a sub-millisecond time
 *   says little about growth (a 3,000-character text read in 0.2 ms once made a
 *   linear shape look super-linear), and a shape that is cheap at the longest
 *   length is harmless at any length the limit allows.
 *
 * The limit is that of the judgement it replaced (the longest length costing at
 * most about 15 times a length ten times shorter, i.e. a cost per character
 * growing at most 1.5 times), now asked of every step between lengths and of
 * the whole range: a quadratic cost grows 3 times from 10,000 to 30,000
 * characters, and a cost with a quadratic part that is half of it at the
 * longest length grows more than 1.5 times over the range.
 */

/** Costs below this (ms) are not told apart from it. */
export const NOISE_FLOOR_MS = 0.5;
/** The most the cost per character may grow, from any length to a longer one, for a linear verdict. */
export const MAX_GROWTH = 1.5;

export interface Linearity {
  linear: boolean;
  /** The cost per character at the longest length over that at the shortest. */
  growth: number;
  /** The same between each length and the next. */
  steps: number[];
}

/** Judges the rounds measured at each length (lengths in any order, each with its rounds' costs in ms). */
export function judgeLinearity(measured: ReadonlyArray<{ length: number; costs: readonly number[] }>): Linearity {
  const points = [...measured]
    .sort((a, b) => a.length - b.length)
    .map(({ length, costs }) => ({ length, perChar: Math.max(NOISE_FLOOR_MS, Math.min(...costs)) / length }));
  if (points.length < 2) throw new Error('linearity needs costs at two lengths or more');
  const steps = points.slice(1).map((p, i) => p.perChar / points[i]!.perChar);
  const growth = points.at(-1)!.perChar / points[0]!.perChar;
  return { linear: growth <= MAX_GROWTH && steps.every((s) => s <= MAX_GROWTH), growth, steps };
}
