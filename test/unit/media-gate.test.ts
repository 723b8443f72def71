/** The decode gate of media/limits.ts: a FIFO budget that is never exceeded. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Gate } from '../../server/media/limits.ts';

describe('decode gate', () => {
  it('when holders of random costs arrive at once, then the budget is never exceeded and they start in arrival order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 10 }), fc.array(fc.integer({ min: 0, max: 15 }), { minLength: 1, maxLength: 30 }), async (capacity, costs) => {
        const gate = new Gate(capacity);
        let used = 0;
        let peak = 0;
        const started: number[] = [];
        await Promise.all(
          costs.map((cost, i) =>
            gate.run(cost, async () => {
              const units = Math.min(Math.max(cost, 1), capacity);
              used += units;
              peak = Math.max(peak, used);
              started.push(i);
              await new Promise((resolve) => setImmediate(resolve));
              used -= units;
            }),
          ),
        );
        assert.ok(peak <= capacity, `peak ${peak} over capacity ${capacity}`);
        assert.deepEqual(
          started,
          costs.map((_, i) => i),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('when a holder fails, then its units are freed for the next one', async () => {
    const gate = new Gate(1);
    await assert.rejects(
      gate.run(1, () => Promise.reject(new Error('decode failed'))),
      /decode failed/,
    );
    assert.equal(await gate.run(1, () => Promise.resolve('next')), 'next');
  });
});
