/**
 * storage/procedure-batches.ts with a runner that records its calls and answers when told: a lone call goes at
 * once, alone; calls of one account arriving while IN_FLIGHT of its calls are in flight go as one batch, in
 * arrival order, each settled by its own outcome; another account never waits; a failed batch fails each item.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { coalesced, IN_FLIGHT, ItemError, MAX_BATCH, waitingCalls, type ItemOutcome, type Runner } from '../../server/storage/procedure-batches.ts';
import type { Conn } from '../../server/storage/engine/query.ts';

interface Call {
  params: string[];
  answer: (outcomes?: ItemOutcome[] | Error) => void;
}

/** A runner whose every call waits until the test answers it. */
function recorder() {
  const calls: Call[] = [];
  const runner: Runner<string> = {
    name: 'test',
    one: (_db, params) =>
      new Promise<void>((resolve, reject) =>
        calls.push({ params: [params], answer: (o) => (o instanceof Error ? reject(o) : o?.[0]?.state ? reject(new ItemError(o[0].state, '')) : resolve()) }),
      ),
    many: (_db, params) =>
      new Promise<ItemOutcome[]>((resolve, reject) =>
        calls.push({ params, answer: (o) => (o instanceof Error ? reject(o) : resolve(o ?? params.map(() => ({ state: null, message: null })))) }),
      ),
  };
  return { calls, runner };
}

const settled = (p: Promise<void>) =>
  p.then(
    () => 'written',
    (e: unknown) => (e instanceof ItemError ? `${e.code} ${e.message}` : `failed: ${(e as Error).message}`),
  );
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('procedure batches', () => {
  it('when calls of one account arrive while its calls are in flight, then they go as one batch in arrival order, each settled by its own outcome', async () => {
    const db = {} as Conn;
    const { calls, runner } = recorder();
    const first = Array.from({ length: IN_FLIGHT }, (_, i) => settled(coalesced(db, runner, 'acct', `alone-${i}`)));
    assert.equal(calls.length, IN_FLIGHT, 'the first calls go at once, with no timer');
    const rest = ['a', 'b', 'c'].map((p) => settled(coalesced(db, runner, 'acct', p)));
    const other = settled(coalesced(db, runner, 'other', 'x'));
    assert.equal(calls.length, IN_FLIGHT + 1, 'another account does not wait');
    assert.equal(waitingCalls(db), 3);
    calls[0]!.answer();
    await turn();
    assert.deepEqual(calls[IN_FLIGHT + 1]!.params, ['a', 'b', 'c'], 'the waiting calls as one batch, in arrival order');
    calls[IN_FLIGHT + 1]!.answer([
      { state: null, message: null },
      { state: 'GF001', message: 'account balance' },
      { state: '23505', message: 'duplicate key' },
    ]);
    for (const c of calls.slice(1, IN_FLIGHT + 1)) c.answer();
    assert.deepEqual(await Promise.all([...first, ...rest, other]), [
      ...first.map(() => 'written'),
      'written',
      'GF001 account balance',
      '23505 duplicate key',
      'written',
    ]);
    assert.equal(waitingCalls(db), 0);
  });

  it('when a batched call fails as a whole, then each of its items fails with that error', async () => {
    const db = {} as Conn;
    const { calls, runner } = recorder();
    const first = Array.from({ length: IN_FLIGHT }, (_, i) => settled(coalesced(db, runner, 'acct', `alone-${i}`)));
    const rest = ['a', 'b'].map((p) => settled(coalesced(db, runner, 'acct', p)));
    calls[0]!.answer();
    await turn();
    calls.at(-1)!.answer(new Error('connection lost'));
    for (const c of calls.slice(1, IN_FLIGHT)) c.answer();
    assert.deepEqual(await Promise.all(rest), ['failed: connection lost', 'failed: connection lost']);
    await Promise.all(first);
  });

  it('when more than MAX_BATCH calls wait, then they go as batches of at most MAX_BATCH, and a lone waiting call goes alone', async () => {
    const db = {} as Conn;
    const { calls, runner } = recorder();
    const all = Array.from({ length: IN_FLIGHT + MAX_BATCH + 1 }, (_, i) => settled(coalesced(db, runner, 'acct', `c${i}`)));
    for (let answered = 0; answered < calls.length || calls.length < IN_FLIGHT + 2; answered++) {
      calls[answered]!.answer();
      await turn();
    }
    assert.deepEqual(
      calls.map((c) => c.params.length),
      [...Array.from({ length: IN_FLIGHT }, () => 1), MAX_BATCH, 1],
    );
    assert.deepEqual(new Set(await Promise.all(all)), new Set(['written']));
  });
});
