/** Opaque ids (server/domain/ids.ts): random bytes drawn from a pool, each used once. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { newId } from '../../server/domain/ids.ts';

describe('ids', () => {
  it('when ids are made across several refills of the random pool, then each is a prefix and 24 hex digits, and none repeats', () => {
    const ids = Array.from({ length: 2_000 }, () => newId('task')); // a pool of 4 KB serves 341
    assert.ok(ids.every((id) => /^task_[0-9a-f]{24}$/.test(id)), ids.find((id) => !/^task_[0-9a-f]{24}$/.test(id)));
    assert.equal(new Set(ids).size, ids.length);
    // Consecutive ids share no bytes: no 12-hex-digit run of one id appears in the next.
    for (let i = 1; i < ids.length; i++) assert.ok(!ids[i]!.includes(ids[i - 1]!.slice(5, 17)));
  });
});
