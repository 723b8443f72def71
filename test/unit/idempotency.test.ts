/** The idempotency module on its own: claim, complete, release, conflict, uncertain, concurrent claims. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as idem from '../../server/domain/idempotency.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { ApiError } from '../../server/errors.ts';
import { ManualClock, makeAccountWithKey, openTestDb, type TestDb } from '../helpers/db.ts';

const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));

function identity(keyId: string, accountId: string, idemKey: string, body: unknown, operation = 'createImage'): idem.Identity {
  return { keyId, accountId, idemKey, operation, fingerprint: idem.fingerprint(body) };
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === code);
}

describe('idempotency', () => {
  let t: TestDb;
  let who: { accountId: string; keyId: string };
  before(async () => {
    t = await openTestDb();
    who = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, who.accountId, 1000, 'grant');
  });
  after(() => t.close());

  const admitCompleted = (ref: string) => async () => ({ value: ref, outcome: { state: 'completed' as const, ref } });

  it('when bodies differ only in key order, then their fingerprints are equal', () => {
    assert.equal(idem.fingerprint({ a: 1, b: { c: [1, 2], d: 'x' } }), idem.fingerprint({ b: { d: 'x', c: [1, 2] }, a: 1 }));
    assert.notEqual(idem.fingerprint({ a: 1 }), idem.fingerprint({ a: 2 }));
    assert.notEqual(idem.fingerprint({ stream: true }), idem.fingerprint({ stream: false }));
  });

  it('when an identity is new, then admit runs; when replayed exactly, then the record comes back without admitting', async () => {
    const id = identity(who.keyId, who.accountId, 'k-new', { p: 1 });
    const first = await idem.submit(t.db, clock, id, admitCompleted('task_1'));
    assert.deepEqual(first, { created: true, value: 'task_1' });
    let admitted = false;
    const second = await idem.submit(t.db, clock, id, async () => {
      admitted = true;
      return { value: 'x', outcome: { state: 'completed' } };
    });
    assert.equal(admitted, false);
    assert.equal(second.created, false);
    assert.equal(second.created === false && second.record.ref, 'task_1');
  });

  it('when the same identity comes with another body or operation, then 409 IDEMPOTENCY_CONFLICT', async () => {
    await idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-conf', { p: 1 }), admitCompleted('task_2'));
    await rejectsWith(idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-conf', { p: 2 }), admitCompleted('t')), 'IDEMPOTENCY_CONFLICT');
    await rejectsWith(idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-conf', { p: 1 }, 'createVideo'), admitCompleted('t')), 'IDEMPOTENCY_CONFLICT');
  });

  it('when another API key uses the same Idempotency-Key, then it is a different identity', async () => {
    const other = await makeAccountWithKey(t.db, clock);
    await idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-shared', { p: 1 }), admitCompleted('a'));
    const r = await idem.submit(t.db, clock, identity(other.keyId, other.accountId, 'k-shared', { p: 9 }), admitCompleted('b'));
    assert.deepEqual(r, { created: true, value: 'b' });
  });

  it('when admission fails inside the claim, then nothing is retained and the same identity may be retried', async () => {
    const id = identity(who.keyId, who.accountId, 'k-admit', { p: 1 });
    const before = await ledger.balanceOf(t.db, who.accountId);
    await rejectsWith(
      idem.submit(t.db, clock, id, async (trx) => {
        await ledger.reserveTx(trx, clock, { ...who, purpose: 'media', amount: 50, maxGems: 10 });
        return { value: 'never', outcome: { state: 'completed' } };
      }),
      'PRICE_CHANGED',
    );
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before);
    await assert.rejects(
      idem.submit(t.db, clock, id, async (trx) => {
        await ledger.reserveTx(trx, clock, { ...who, purpose: 'media', amount: 5 });
        throw new ApiError(503, 'PROVIDER_UNAVAILABLE', 'down');
      }),
      (e: unknown) => e instanceof ApiError && e.status === 503,
    );
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before, 'the reservation rolled back with the claim');
    const ok = await idem.submit(t.db, clock, id, admitCompleted('task_ok'));
    assert.equal(ok.created, true);
  });

  it('when a claim is pending or uncertain, then replays get REQUEST_UNCERTAIN; when released, REQUEST_FAILED', async () => {
    const id = identity(who.keyId, who.accountId, 'k-pending', { p: 1 });
    await idem.submit(t.db, clock, id, async () => ({ value: null, outcome: { state: 'pending' } }));
    await rejectsWith(idem.submit(t.db, clock, id, admitCompleted('x')), 'REQUEST_UNCERTAIN');
    await idem.markUncertain(t.db, clock, id);
    await rejectsWith(idem.submit(t.db, clock, id, admitCompleted('x')), 'REQUEST_UNCERTAIN');
    await idem.markReleased(t.db, clock, id);
    await rejectsWith(idem.submit(t.db, clock, id, admitCompleted('x')), 'REQUEST_FAILED');

    const done = identity(who.keyId, who.accountId, 'k-complete', { p: 1 });
    await idem.submit(t.db, clock, done, async () => ({ value: null, outcome: { state: 'pending' } }));
    await idem.complete(t.db, clock, done, { responseStatus: 200, responseBody: '{"ok":true}' });
    const replay = await idem.submit(t.db, clock, done, admitCompleted('x'));
    assert.equal(replay.created === false && replay.record.response_body, '{"ok":true}');
  });

  it('when 100 claims of one identity arrive at once, then exactly one admits and reserves', async () => {
    const id = identity(who.keyId, who.accountId, 'k-race', { p: 1 });
    let admits = 0;
    const before = await ledger.balanceOf(t.db, who.accountId);
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, () =>
        idem.submit(t.db, clock, id, async (trx) => {
          admits++;
          const r = await ledger.reserveTx(trx, clock, { ...who, purpose: 'media', amount: 3 });
          return { value: r.id, outcome: { state: 'completed', ref: r.id, reservationId: r.id } };
        }),
      ),
    );
    assert.equal(admits, 1);
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before - 3);
    const created = results.filter((r) => r.status === 'fulfilled' && r.value.created).length;
    assert.equal(created, 1);
    for (const r of results) {
      if (r.status === 'rejected') assert.equal((r.reason as ApiError).code, 'REQUEST_UNCERTAIN');
    }
  });

  /** Claims an identity that stays pending with a held reservation of `amount`. */
  async function pendingWithReservation(idemKey: string, amount: number): Promise<string> {
    const r = await idem.submit(t.db, clock, identity(who.keyId, who.accountId, idemKey, { p: idemKey }), async (trx) => {
      const rsv = await ledger.reserveTx(trx, clock, { ...who, purpose: 'media', amount });
      return { value: rsv.id, outcome: { state: 'pending' as const, reservationId: rsv.id } };
    });
    assert.equal(r.created, true);
    return r.created ? r.value : '';
  }

  it('when an operator releases a pending identity without saying it is dead, then it is refused; with pending, then the hold is released', async () => {
    await pendingWithReservation('k-op-pending', 7);
    await assert.rejects(idem.operatorRelease(t.db, clock, who.keyId, 'k-op-pending'), /may still be running/);
    const { record, releasedGems } = await idem.operatorRelease(t.db, clock, who.keyId, 'k-op-pending', { pending: true });
    assert.equal(record.state, 'released');
    assert.equal(releasedGems, 7);
    await rejectsWith(idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-op-pending', { p: 'k-op-pending' }), admitCompleted('x')), 'REQUEST_FAILED');
  });

  it('when an uncertain identity was already charged, then the operator cannot release it as if nothing happened', async () => {
    const reservationId = await pendingWithReservation('k-op-charged', 9);
    await ledger.settle(t.db, clock, reservationId, 4);
    await idem.markUncertain(t.db, clock, { keyId: who.keyId, idemKey: 'k-op-charged' });
    await assert.rejects(idem.operatorRelease(t.db, clock, who.keyId, 'k-op-charged'), /already charged 4 Gems/);
    await rejectsWith(idem.submit(t.db, clock, identity(who.keyId, who.accountId, 'k-op-charged', { p: 'k-op-charged' }), admitCompleted('x')), 'REQUEST_UNCERTAIN');
  });
});
