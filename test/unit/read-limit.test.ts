/**
 * The process-wide pace of reads to an asynchronous upstream
 * (server/providers/remote/read-limit.ts), on a hand-moved clock.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readLimiter, TokenBucket } from '../../server/providers/remote/read-limit.ts';

describe('read limiter', () => {
  it("when reads come faster than the rate, then past one second's burst each waits its turn in arrival order", () => {
    let now = 0;
    const bucket = new TokenBucket(120, () => now); // 2 a second, a burst of 2
    assert.deepEqual([bucket.reserve(), bucket.reserve()], [0, 0], 'the burst');
    assert.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve()], [500, 1000, 1500], 'then one every 500 ms');
    now = 1500; // the promised tokens are due; the bucket is empty again
    assert.equal(bucket.reserve(), 500);
  });

  it("when the upstream was left alone for long, then no more than one second's worth is saved up", () => {
    let now = 0;
    const bucket = new TokenBucket(3000, () => now);
    now = 10 * 60_000;
    const waits = Array.from({ length: 60 }, () => bucket.reserve());
    assert.equal(waits.filter((w) => w === 0).length, 50, '3,000 a minute saves at most 50');
    assert.ok(waits.at(-1)! > 0);
  });

  it('when a minute of reads at the default pace is counted, then it stays inside the rate plus its burst', () => {
    let now = 0;
    const bucket = new TokenBucket(2900, () => now);
    let sent = 0;
    // 64 jobs polling every second would ask 3,840 times: each read is sent when its token is due.
    for (let i = 0; i < 3840; i++) if (bucket.reserve() < 60_000) sent++;
    assert.ok(sent <= 2900 + bucket.burst, `${sent} reads in the first minute`);
    assert.ok(sent < 3000, "within Replicate's 3,000 a minute");
  });

  it('when the same deployment is named by two models, then they share one bucket; another key or URL has its own', () => {
    const a = readLimiter('replicate', 'https://api.replicate.com', 'r8_a', 2900);
    assert.equal(readLimiter('replicate', 'https://api.replicate.com', 'r8_a', 2900), a);
    assert.notEqual(readLimiter('replicate', 'https://api.replicate.com', 'r8_b', 2900), a);
    assert.notEqual(readLimiter('replicate', 'https://other.example', 'r8_a', 2900), a);
    assert.notEqual(readLimiter('fal', 'https://api.replicate.com', 'r8_a', 2900), a);
  });

  it("when a waiting read's job is stopped, then the wait ends at once", async () => {
    const bucket = new TokenBucket(1);
    await bucket.take();
    const controller = new AbortController();
    const waiting = bucket.take(controller.signal);
    controller.abort(new Error('stopping'));
    await assert.rejects(waiting, /stopping/);
  });
});
