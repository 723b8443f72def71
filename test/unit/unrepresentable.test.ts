/**
 * What rejectUnrepresentable looks for (http/unrepresentable.ts): the quick scan
 * that lets a request by says "nothing here" exactly when the search that names
 * the place finds nothing.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { holdsUnrepresentable, unrepresentable } from '../../server/http/unrepresentable.ts';

/** JSON-like values with the odd non-finite number and NUL-carrying string, nested a few levels. */
const values = fc.letrec((tie) => ({
  leaf: fc.oneof(
    fc.string(),
    fc.string().map((s) => `${s}\u0000`),
    fc.double(),
    fc.constantFrom(Infinity, -Infinity, NaN, 0, null, true),
  ),
  node: fc.oneof({ depthSize: 'small' }, tie('leaf'), fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(fc.string(), tie('node'), { maxKeys: 4 })),
})).node;

describe('unrepresentable values', () => {
  it('when any value is scanned, then the quick scan finds something exactly when the search names a place', () => {
    fc.assert(
      fc.property(values, (value) => {
        assert.equal(holdsUnrepresentable(value), unrepresentable(value, 'body') !== undefined);
      }),
      { numRuns: 2000 },
    );
  });

  it('when a value hides a NUL deep in an array in an object, then the search names its path', () => {
    assert.deepEqual(unrepresentable({ a: [1, { b: 'x\u0000' }] }, 'body'), { path: 'body.a[1].b', problem: 'must not contain the NUL character (U+0000)' });
    assert.equal(holdsUnrepresentable(Object.assign(Object.create({ inherited: Infinity }), { own: 1 })), false, 'only own keys, as Object.entries');
  });
});
