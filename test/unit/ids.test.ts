/** Opaque ids (server/domain/ids.ts): random bytes drawn from a pool, each used once, after a part that grows with time. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { newId } from '../../server/domain/ids.ts';

describe('ids', () => {
  it('when ids are made across several refills of the random pool, then each is a prefix and 24 hex digits, and none repeats', () => {
    const ids = Array.from({ length: 2_000 }, () => newId('task')); // a pool of 4 KB serves 341
    assert.ok(
      ids.every((id) => /^task_[0-9a-f]{24}$/.test(id)),
      ids.find((id) => !/^task_[0-9a-f]{24}$/.test(id)),
    );
    assert.equal(new Set(ids).size, ids.length);
    // Consecutive ids share no bytes: no 12-hex-digit run of one id appears in the next.
    for (let i = 1; i < ids.length; i++) assert.ok(!ids[i]!.includes(ids[i - 1]!.slice(5, 17)));
  });

  it('when ids are made one after another, then they sort in the order they were made and their first 12 hex digits tell when', async () => {
    await new Promise((resolve) => setTimeout(resolve, 100)); // the clock catches up with the burst of the test before
    const before = Date.now();
    const ids = Array.from({ length: 1_000 }, () => newId('rsv'));
    await new Promise((resolve) => setTimeout(resolve, 5));
    const later = newId('rsv');
    const after = Date.now();
    assert.deepEqual([...ids, later].sort(), [...ids, later]);
    const made = (id: string) => Math.floor(Number.parseInt(id.slice(4, 16), 16) / 64);
    // A burst of more than 64 ids in a millisecond runs ahead of the clock by a millisecond per 64.
    assert.ok(made(ids[0]!) >= before && made(ids[0]!) <= after, `${made(ids[0]!)} not in ${before}..${after}`);
    assert.ok(made(later) >= made(ids.at(-1)!) && made(later) <= after + Math.ceil(1_000 / 64), `${made(later)}`);
  });
});
