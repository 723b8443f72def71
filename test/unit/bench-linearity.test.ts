/**
 * The moderation benchmark's linearity judgement (scripts/bench/linearity.ts):
 * robust to sub-millisecond noise, yet a cost that grows faster than the text
 * still reads as not linear. The costs here are counted steps of real functions
 * (scaled to milliseconds) with noise drawn from a seed, not timings, so the
 * verdicts do not depend on the machine.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { judgeLinearity, NOISE_FLOOR_MS } from '../../scripts/bench/linearity.ts';
import { rng } from '../../server/providers/random.ts';

const LENGTHS = [3_000, 10_000, 30_000];
const ROUNDS = 7;

/**
 * A punctuated text's pieces merged the way that made moderation super-linear: from each start,
 * every span from the longest down until one is a known word (here, "p0" and the piece after
 * it). Returns the steps taken (spans tried).
 */
function mergeEverySpan(length: number): number {
  const known = spans.get(length);
  if (known !== undefined) return known;
  const pieces = Array.from({ length: Math.floor(length / 10) }, (_, i) => `p${i % 7}`);
  let steps = 0;
  for (let i = 0; i < pieces.length; i++) {
    for (let j = pieces.length; j > i + 1; j--) {
      steps++;
      if (j === i + 2 && pieces[i] === 'p0') break;
    }
  }
  spans.set(length, steps);
  return steps;
}
const spans = new Map<number, number>();

/** One pass over the text: the linear reading. */
function readOnce(length: number): number {
  let steps = 0;
  for (let i = 0; i < length; i++) steps += i % 3 === 0 ? 2 : 1;
  return steps;
}

/**
 * Each length's rounds: the function's steps as ms (`msPerStep`), plus noise from `seed`: up to
 * `jitterMs` on every round and, on one round in three, a spike of up to `spikeMs` (a collection).
 */
function measure(steps: (length: number) => number, msPerStep: number, seed: number, jitterMs = 0.3, spikeMs = 8) {
  const random = rng(seed);
  return LENGTHS.map((length) => {
    const cost = steps(length) * msPerStep;
    const costs = Array.from({ length: ROUNDS }, () => cost + random() * jitterMs + (random() < 1 / 3 ? random() * spikeMs : 0));
    return { length, costs };
  });
}

describe('the moderation benchmark judges linearity', () => {
  it('when a deliberately quadratic function is measured, then it reads as not linear, whatever the noise', () => {
    // Scaled so that 30,000 characters cost 20 ms, the in-process target: slow enough to matter.
    const msPerStep = 20 / mergeEverySpan(30_000);
    for (let seed = 1; seed <= 50; seed++) {
      const verdict = judgeLinearity(measure(mergeEverySpan, msPerStep, seed));
      assert.equal(verdict.linear, false, `seed ${seed}: ${JSON.stringify(verdict)}`);
      assert.ok(verdict.steps.at(-1)! > 2.5, `seed ${seed}: from 10,000 to 30,000 characters ${verdict.steps.at(-1)}`);
    }
  });

  it('when a linear function is measured with sub-millisecond short texts, jitter and collections, then it reads as linear', () => {
    // The case that read "NO": 3,000 characters in about 0.3 ms, 30,000 in about 3 ms.
    const msPerStep = 3 / readOnce(30_000);
    for (let seed = 1; seed <= 50; seed++) {
      const verdict = judgeLinearity(measure(readOnce, msPerStep, seed));
      assert.equal(verdict.linear, true, `seed ${seed}: ${JSON.stringify(verdict)}`);
    }
    assert.ok(readOnce(3_000) * msPerStep < NOISE_FLOOR_MS, 'the short texts cost less than the noise floor');
  });

  it('when a linear cost has a quadratic part that is half of it at the longest length, then it reads as not linear', () => {
    const quadratic = mergeEverySpan(30_000);
    const linear = readOnce(30_000);
    // 10 ms linear and 10 ms quadratic at 30,000 characters.
    const mixed = (length: number) => (readOnce(length) * 10) / linear + (mergeEverySpan(length) * 10) / quadratic;
    for (let seed = 1; seed <= 20; seed++) assert.equal(judgeLinearity(measure(mixed, 1, seed)).linear, false, `seed ${seed}`);
  });

  it('when the same cost is measured at every length, then it reads as linear (a fixed cost per text)', () => {
    assert.equal(judgeLinearity(LENGTHS.map((length) => ({ length, costs: [4, 5, 4.2] }))).linear, true);
  });
});
