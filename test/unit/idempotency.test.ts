/**
 * The idempotency rules through a submission's transaction (spend.inSubmission,
 * whose first step claims the identity, after the replay lookup as text and
 * extraction make it): claim, complete, release, conflict, uncertain,
 * concurrent claims.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as idem from '../../server/domain/idempotency.ts';
import * as ledger from '../../server/domain/ledger.ts';
import * as spend from '../../server/domain/spend.ts';
import { answerOf } from '../../server/http/error-map.ts';
import { verifyLedger } from '../../server/domain/ledger-verify.ts';
import { DomainError } from '../../server/domain/errors.ts';
import { ManualClock, makeAccountWithKey, openTestDb, type TestDb } from '../helpers/db.ts';

const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));

function identity(keyId: string, accountId: string, idemKey: string, body: unknown, operation = 'createImage'): idem.Identity {
  return { keyId, accountId, idemKey, operation, fingerprint: idem.fingerprint(body) };
}

/**
 * A submission as text and extraction make one: the replay lookup, then the
 * transaction that claims the identity with `outcome` and runs `run`'s steps.
 */
async function submit<T>(
  db: TestDb['db'],
  id: idem.Identity,
  outcome: idem.ClaimOutcome,
  run: (s: spend.Submission) => Promise<T>,
): Promise<idem.SubmitResult<T>> {
  const existing = await idem.lookup(db, id);
  if (existing) return { created: false, record: existing };
  return spend.inSubmission(db, clock, id, async (s) => {
    await s.claim(outcome);
    return run(s);
  });
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => answerOf(e)?.status === 409 && answerOf(e)?.code === code);
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

  /** Claims `id` completed with `ref`, and answers `ref`. */
  const completed = (id: idem.Identity, ref: string) => submit(t.db, id, { state: 'completed', ref }, async () => ref);

  it('when bodies differ only in key order, then their fingerprints are equal', () => {
    assert.equal(idem.fingerprint({ a: 1, b: { c: [1, 2], d: 'x' } }), idem.fingerprint({ b: { d: 'x', c: [1, 2] }, a: 1 }));
    assert.notEqual(idem.fingerprint({ a: 1 }), idem.fingerprint({ a: 2 }));
    assert.notEqual(idem.fingerprint({ stream: true }), idem.fingerprint({ stream: false }));
  });

  it('when an identity is new, then admit runs; when replayed exactly, then the record comes back without admitting', async () => {
    const id = identity(who.keyId, who.accountId, 'k-new', { p: 1 });
    const first = await completed(id, 'task_1');
    assert.deepEqual(first, { created: true, value: 'task_1' });
    let admitted = false;
    const second = await submit(t.db, id, { state: 'completed' }, async () => {
      admitted = true;
      return 'x';
    });
    assert.equal(admitted, false);
    assert.equal(second.created, false);
    assert.equal(second.created === false && second.record.ref, 'task_1');
  });

  it('when the same identity comes with another body or operation, then 409 IDEMPOTENCY_CONFLICT', async () => {
    await completed(identity(who.keyId, who.accountId, 'k-conf', { p: 1 }), 'task_2');
    await rejectsWith(completed(identity(who.keyId, who.accountId, 'k-conf', { p: 2 }), 't'), 'IDEMPOTENCY_CONFLICT');
    await rejectsWith(completed(identity(who.keyId, who.accountId, 'k-conf', { p: 1 }, 'createVideo'), 't'), 'IDEMPOTENCY_CONFLICT');
  });

  it('when another API key uses the same Idempotency-Key, then it is a different identity', async () => {
    const other = await makeAccountWithKey(t.db, clock);
    await completed(identity(who.keyId, who.accountId, 'k-shared', { p: 1 }), 'a');
    const r = await completed(identity(other.keyId, other.accountId, 'k-shared', { p: 9 }), 'b');
    assert.deepEqual(r, { created: true, value: 'b' });
  });

  it('when admission fails inside the claim, then nothing is retained and the same identity may be retried', async () => {
    const id = identity(who.keyId, who.accountId, 'k-admit', { p: 1 });
    const before = await ledger.balanceOf(t.db, who.accountId);
    await rejectsWith(
      submit(t.db, id, { state: 'completed', reservationId: 'rsv_never' }, async ({ hold }) => {
        await hold({ purpose: 'media', amount: 50, maxGems: 10, id: 'rsv_never' });
        return 'never';
      }),
      'PRICE_CHANGED',
    );
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before);
    await assert.rejects(
      submit(t.db, id, { state: 'completed', reservationId: 'rsv_down' }, async ({ hold }) => {
        await hold({ purpose: 'media', amount: 5, id: 'rsv_down' });
        throw new DomainError('PROVIDER_UNAVAILABLE', 'down');
      }),
      (e: unknown) => answerOf(e)?.status === 503,
    );
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before, 'the reservation rolled back with the claim');
    const ok = await completed(id, 'task_ok');
    assert.equal(ok.created, true);
  });

  it('when a submission holds Gems before claiming, or holds a reservation its claim does not name, then it is refused and nothing is kept', async () => {
    const before = await ledger.balanceOf(t.db, who.accountId);
    const id = identity(who.keyId, who.accountId, 'k-order', { p: 1 });
    await assert.rejects(
      spend.inSubmission(t.db, clock, id, ({ hold }) => hold({ purpose: 'media', amount: 2, id: 'rsv_order' })),
      /claims its identity before it holds Gems/,
    );
    await assert.rejects(
      spend.inSubmission(t.db, clock, id, async ({ claim, hold }) => {
        await claim({ state: 'completed', reservationId: 'rsv_named' });
        return hold({ purpose: 'media', amount: 2, id: 'rsv_other' });
      }),
      /must name the reservation/,
    );
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before);
    assert.equal(await idem.lookup(t.db, id), undefined, 'the identity is still free');
  });

  it('when a claim is pending or uncertain, then replays get REQUEST_UNCERTAIN; when released, REQUEST_FAILED', async () => {
    const id = identity(who.keyId, who.accountId, 'k-pending', { p: 1 });
    await submit(t.db, id, { state: 'pending' }, async () => null);
    await rejectsWith(completed(id, 'x'), 'REQUEST_UNCERTAIN');
    await idem.markUncertain(t.db, clock, id);
    await rejectsWith(completed(id, 'x'), 'REQUEST_UNCERTAIN');
    await idem.markReleased(t.db, clock, id);
    await rejectsWith(completed(id, 'x'), 'REQUEST_FAILED');

    const done = identity(who.keyId, who.accountId, 'k-complete', { p: 1 });
    await submit(t.db, done, { state: 'pending' }, async () => null);
    await idem.complete(t.db, clock, done, { retained: { answer: '{"ok":true}' } });
    const replay = await completed(done, 'x');
    assert.equal(replay.created === false && replay.record.response_body, '{"ok":true}');
  });

  it('when 100 claims of one identity arrive at once, then exactly one admits and reserves', async () => {
    const id = identity(who.keyId, who.accountId, 'k-race', { p: 1 });
    // The key's first hold creates its balance row the long way (on Postgres a hold decided at the
    // commit is refused without it, and the winner's story runs twice): give it one first.
    await completedHold('k-race-first', 1);
    let admits = 0;
    const before = await ledger.balanceOf(t.db, who.accountId);
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, () =>
        submit(t.db, id, { state: 'completed', ref: 'rsv_race', reservationId: 'rsv_race' }, async ({ hold }) => {
          admits++;
          return (await hold({ purpose: 'media', amount: 3, id: 'rsv_race' })).id;
        }),
      ),
    );
    assert.equal(admits, 1);
    assert.equal(await ledger.balanceOf(t.db, who.accountId), before - 3);
    const created = results.filter((r) => r.status === 'fulfilled' && r.value.created).length;
    assert.equal(created, 1);
    for (const r of results) {
      if (r.status === 'rejected') assert.equal((r.reason as DomainError).code, 'REQUEST_UNCERTAIN');
    }
  });

  /** Claims an identity completed with a held reservation of `amount`. */
  async function completedHold(idemKey: string, amount: number): Promise<void> {
    const reservationId = `rsv_${idemKey}`;
    await submit(t.db, identity(who.keyId, who.accountId, idemKey, { p: idemKey }), { state: 'completed', reservationId }, ({ hold }) =>
      hold({ purpose: 'media', amount, id: reservationId }),
    );
  }

  /** Claims an identity that stays pending with a held reservation of `amount`. */
  async function pendingWithReservation(idemKey: string, amount: number): Promise<string> {
    const reservationId = `rsv_${idemKey}`;
    const r = await submit(t.db, identity(who.keyId, who.accountId, idemKey, { p: idemKey }), { state: 'pending', reservationId }, async ({ hold }) => {
      return (await hold({ purpose: 'media', amount, id: reservationId })).id;
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
    await rejectsWith(completed(identity(who.keyId, who.accountId, 'k-op-pending', { p: 'k-op-pending' }), 'x'), 'REQUEST_FAILED');
  });

  /** A pending identity with its hold, as a text completion's claim keeps it for the settlement. */
  async function pendingClaim(idemKey: string, amount: number): Promise<spend.Claim> {
    const id = identity(who.keyId, who.accountId, idemKey, { p: idemKey });
    const reservationId = `rsv_${idemKey}`;
    const r = await submit(t.db, id, { state: 'pending', reservationId, ref: idemKey }, ({ hold }) => hold({ purpose: 'media', amount, id: reservationId }));
    assert.equal(r.created, true);
    return { identity: id, reservationId, reserved: amount, ref: idemKey, held: r.created ? r.value : undefined };
  }

  it('when a settlement comes after an operator released its pending identity, then it fails as it always did and charges nothing', async () => {
    const claim = await pendingClaim('k-settle-released', 5);
    await idem.operatorRelease(t.db, clock, who.keyId, 'k-settle-released', { pending: true });
    const balance = await ledger.balanceOf(t.db, who.accountId);
    // Decided at the commit first (SQLite: one round trip), refused there, then step by step: the record is not pending.
    await assert.rejects(spend.billAndRetain(t.db, clock, claim, 3, { answer: '{}' }), /k-settle-released was not pending/);
    assert.equal(await ledger.balanceOf(t.db, who.accountId), balance);
    assert.equal(
      await idem.lookup(t.db, claim.identity).then(
        () => 'answered',
        (e: unknown) => answerOf(e)?.code,
      ),
      'REQUEST_FAILED',
    );
    assert.equal((await verifyLedger(t.db)).ok, true);
  });

  it('when a settlement finds its hold already closed, then it fails as it always did, charges nothing and leaves its identity pending', async () => {
    const claim = await pendingClaim('k-settle-closed', 6);
    await ledger.release(t.db, clock, claim.reservationId);
    const balance = await ledger.balanceOf(t.db, who.accountId);
    await assert.rejects(spend.billAndRetain(t.db, clock, claim, 4, { answer: '{}' }), /reservation rsv_k-settle-closed was closed concurrently/);
    assert.equal(await ledger.balanceOf(t.db, who.accountId), balance);
    await rejectsWith(idem.lookup(t.db, claim.identity), 'REQUEST_UNCERTAIN');
    assert.equal((await verifyLedger(t.db)).ok, true);
  });

  it('when a settlement is whole, then it charges once, completes the identity and a second settlement of it is refused', async () => {
    const claim = await pendingClaim('k-settle-once', 8);
    const balance = await ledger.balanceOf(t.db, who.accountId);
    await spend.billAndRetain(t.db, clock, claim, 3, { answer: '{"ok":true}' });
    assert.equal(await ledger.balanceOf(t.db, who.accountId), balance + 8 - 3);
    assert.equal((await idem.lookup(t.db, claim.identity))?.response_body, '{"ok":true}');
    await assert.rejects(spend.billAndRetain(t.db, clock, claim, 3, { answer: '{}' }), /k-settle-once was not pending/);
    assert.equal(await ledger.balanceOf(t.db, who.accountId), balance + 8 - 3);
    assert.equal((await verifyLedger(t.db)).ok, true);
  });

  it('when an uncertain identity was already charged, then the operator cannot release it as if nothing happened', async () => {
    const reservationId = await pendingWithReservation('k-op-charged', 9);
    await ledger.settle(t.db, clock, reservationId, 4);
    await idem.markUncertain(t.db, clock, { keyId: who.keyId, idemKey: 'k-op-charged' });
    await assert.rejects(idem.operatorRelease(t.db, clock, who.keyId, 'k-op-charged'), /already charged 4 Gems/);
    await rejectsWith(completed(identity(who.keyId, who.accountId, 'k-op-charged', { p: 'k-op-charged' }), 'x'), 'REQUEST_UNCERTAIN');
  });
});
