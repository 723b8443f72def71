/** The ledger's rules, one by one, and its invariants over random interleavings (fast-check). */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as ledger from '../../server/domain/ledger.ts';
import * as spend from '../../server/domain/spend.ts';
import { onStatement, type Db } from '../../server/storage/db.ts';
import { verifyLedger } from '../../server/domain/ledger-verify.ts';
import { answerOf } from '../../server/http/error-map.ts';
import { openDb } from '../../server/storage/db.ts';
import { ManualClock, makeAccountWithKey, openTestDb, type TestDb } from '../helpers/db.ts';
import { dbOptionsFor } from '../helpers/database.ts';

async function rejects(p: Promise<unknown>, status: number, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(p, (thrown: unknown) => {
    // The domain's refusal as the API answers it (error-map.ts).
    const e = answerOf(thrown);
    assert.ok(e, `expected a domain error, got ${String(thrown)}`);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    if (message) assert.match(e.message, message);
    return true;
  });
}

describe('ledger rules', () => {
  let t: TestDb;
  const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));
  before(async () => {
    t = await openTestDb();
  });
  after(() => t.close());

  it('when a media reservation is settled below it, then the rest is released and the balance reflects only the charge', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 100, 'grant');
    const r = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 40 });
    assert.equal(await ledger.balanceOf(t.db, accountId), 60);
    assert.deepEqual(await ledger.settle(t.db, clock, r.id, 25), { charged: 25, released: 15 });
    assert.equal(await ledger.balanceOf(t.db, accountId), 75);
  });

  it('when a settlement asks for more than the reservation, then the charge is capped at the reservation', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 100, 'grant');
    const r = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 10 });
    assert.deepEqual(await ledger.settle(t.db, clock, r.id, 1000), { charged: 10, released: 0 });
    assert.equal(await ledger.balanceOf(t.db, accountId), 90);
  });

  it('when a reservation is settled twice, then the second settlement fails and nothing moves', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 20, 'grant');
    const r = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 10 });
    await ledger.release(t.db, clock, r.id);
    await assert.rejects(ledger.settle(t.db, clock, r.id, 5), /already released/);
    assert.equal(await ledger.balanceOf(t.db, accountId), 20);
  });

  it('when the quote is above maxGems, then 409 PRICE_CHANGED names both and nothing is reserved', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 100, 'grant');
    await rejects(
      ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 12, maxGems: 11 }),
      409,
      'PRICE_CHANGED',
      /12 Gems.*maxGems ceiling of 11/,
    );
    assert.equal(await ledger.balanceOf(t.db, accountId), 100);
  });

  it('when the balance cannot cover a media quote, then 402 INSUFFICIENT_GEMS names the balance and the need', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 5, 'grant');
    await rejects(ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 6 }), 402, 'INSUFFICIENT_GEMS', /balance of 5 Gems.*needs 6 Gems/);
  });

  it('when a key cap is 0, then spending is disabled with 402 API_KEY_LIMIT', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 0 });
    await ledger.credit(t.db, clock, accountId, 100, 'grant');
    await rejects(ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 1 }), 402, 'API_KEY_LIMIT', /cap is 0/);
  });

  it('when a reservation from last month is still held, then it counts against this month’s key cap', async () => {
    const c = new ManualClock(new Date('2026-10-31T23:59:00Z'));
    const { accountId, keyId } = await makeAccountWithKey(t.db, c, { cap: 50 });
    await ledger.credit(t.db, c, accountId, 1000, 'grant');
    const old = await ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 30 });
    const settledOld = await ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 20 });
    await ledger.settle(t.db, c, settledOld.id, 20); // charged in October: does not count in November
    c.set('2026-11-01T00:00:01Z');
    // November: 0 charged + 30 held from October → 20 left.
    await rejects(
      ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 21 }),
      402,
      'API_KEY_LIMIT',
      /30 Gems are already charged this UTC month or held.*needs 21 Gems/,
    );
    const ok = await ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 20 });
    // Settling the October hold in November posts its charge in November.
    await ledger.settle(t.db, c, old.id, 10);
    await ledger.settle(t.db, c, ok.id, 20);
    await rejects(ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 21 }), 402, 'API_KEY_LIMIT');
    await ledger.reserve(t.db, c, { accountId, keyId, purpose: 'media', amount: 20 });
  });

  it('when LLM usage exceeds the allowance without consent, then 402 LLM_QUOTA_EXHAUSTED; with consent, paid Gems cover the rest', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { llmAllowance: 10 });
    await ledger.credit(t.db, clock, accountId, 100, 'grant');
    await rejects(ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'llm', amount: 11 }), 402, 'LLM_QUOTA_EXHAUSTED', /10 Gems left.*not consented/);
    const within = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'llm', amount: 10 });
    assert.equal(within.hold_allowance, 10);
    assert.equal(within.hold_paid, 0);
    assert.equal(await ledger.balanceOf(t.db, accountId), 100, 'the allowance does not touch the paid balance');

    const consenting = await makeAccountWithKey(t.db, clock, { llmAllowance: 10, paidConsent: true });
    await ledger.credit(t.db, clock, consenting.accountId, 5, 'grant');
    const split = await ledger.reserve(t.db, clock, { ...consenting, purpose: 'llm', amount: 14 });
    assert.equal(split.hold_allowance, 10);
    assert.equal(split.hold_paid, 4);
    await rejects(ledger.reserve(t.db, clock, { ...consenting, purpose: 'llm', amount: 2 }), 402, 'LLM_QUOTA_EXHAUSTED', /balance of 1 Gem/);
    // Settling 12 charges the allowance first (10) then 2 paid; 2 paid come back.
    await ledger.settle(t.db, clock, split.id, 12);
    assert.equal(await ledger.balanceOf(t.db, consenting.accountId), 3);
  });

  it('when verify runs after all of the above, then every invariant holds', async () => {
    const report = await verifyLedger(t.db);
    assert.deepEqual(report.problems, []);
    assert.equal(report.ok, true);
  });

  it('when a row is tampered with, then verify reports it', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
    await ledger.credit(t.db, clock, accountId, 10, 'grant');
    const r = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 10 });
    await ledger.settle(t.db, clock, r.id, 4);
    await t.db('reservations').where({ id: r.id }).update({ charged: 9 });
    const report = await verifyLedger(t.db);
    assert.equal(report.ok, false);
    assert.ok(report.problems.some((p) => p.includes(r.id)));
    await t.db('reservations').where({ id: r.id }).update({ charged: 4 });
  });
});

type Op =
  | { kind: 'reserve'; who: number; purpose: 'media' | 'llm'; amount: number; maxGems?: number }
  | { kind: 'settle'; pick: number; fraction: number }
  | { kind: 'release'; pick: number }
  | { kind: 'month' }
  | { kind: 'credit'; who: number; amount: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('reserve' as const),
    who: fc.nat(3),
    purpose: fc.constantFrom('media' as const, 'llm' as const),
    amount: fc.nat(60),
    maxGems: fc.option(fc.nat(60), { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1.5, noNaN: true }) }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('month' as const) }),
  fc.record({ kind: fc.constant('credit' as const), who: fc.nat(3), amount: fc.nat(50) }),
);

describe('ledger invariants (property)', () => {
  it('when reserves, settles, releases and month changes interleave at random, then no limit is ever passed and verify holds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), fc.array(fc.array(opArb, { maxLength: 6 }), { maxLength: 4 }), async (ops, bursts) => {
        const t = await openTestDb();
        try {
          const clock = new ManualClock(new Date('2026-01-31T22:00:00Z'));
          // Two accounts, four keys: (acct0,key0 cap 80), (acct0,key1 no cap), (acct1,key2 cap 40), (acct1,key3 cap 0)
          const a0 = await makeAccountWithKey(t.db, clock, { cap: 80, llmAllowance: 30, paidConsent: true });
          const a1 = await makeAccountWithKey(t.db, clock, { cap: 40, llmAllowance: 20 });
          const { createKey } = await import('../../server/domain/accounts.ts');
          const k1 = (await createKey(t.db, clock, 'gf', { accountId: a0.accountId, name: 'k1', scopes: ['generate'] })).key.id;
          const k3 = (await createKey(t.db, clock, 'gf', { accountId: a1.accountId, name: 'k3', scopes: ['generate'], monthlyCap: 0 })).key.id;
          const who = [
            { accountId: a0.accountId, keyId: a0.keyId, cap: 80 },
            { accountId: a0.accountId, keyId: k1, cap: null },
            { accountId: a1.accountId, keyId: a1.keyId, cap: 40 },
            { accountId: a1.accountId, keyId: k3, cap: 0 },
          ];
          await ledger.credit(t.db, clock, a0.accountId, 100, 'grant');
          await ledger.credit(t.db, clock, a1.accountId, 60, 'grant');
          const held: string[] = [];

          const run = async (op: Op) => {
            try {
              if (op.kind === 'reserve') {
                const w = who[op.who];
                const r = await ledger.reserve(t.db, clock, {
                  accountId: w.accountId,
                  keyId: w.keyId,
                  purpose: op.purpose,
                  amount: op.amount,
                  maxGems: op.maxGems,
                });
                assert.ok(op.maxGems === undefined || op.amount <= op.maxGems, 'never above maxGems');
                assert.notEqual(w.cap, 0, 'cap 0 never reserves');
                held.push(r.id);
              } else if ((op.kind === 'settle' || op.kind === 'release') && held.length) {
                const [id] = held.splice(op.pick % held.length, 1);
                const r = (await t.db('reservations').where({ id }).first()) as { hold_allowance: number; hold_paid: number };
                const total = Number(r.hold_allowance) + Number(r.hold_paid);
                const charge = op.kind === 'settle' ? Math.floor(total * op.fraction) : 0;
                const s = op.kind === 'settle' ? await ledger.settle(t.db, clock, id, charge) : await ledger.release(t.db, clock, id);
                assert.ok(s.charged <= total);
                assert.equal(s.charged + s.released, total);
              } else if (op.kind === 'month') {
                clock.advance(17 * 24 * 3600 * 1000);
              } else if (op.kind === 'credit') {
                await ledger.credit(t.db, clock, who[op.who].accountId, op.amount, 'grant');
              }
            } catch (e) {
              const answer = answerOf(e);
              if (!answer) throw e;
              assert.ok([402, 409].includes(answer.status), `unexpected ${answer.status}`);
            }
          };

          for (const op of ops) await run(op);
          // Bursts: operations issued at once, interleaving at every await.
          for (const burst of bursts) await Promise.all(burst.map(run));

          const report = await verifyLedger(t.db);
          assert.deepEqual(report.problems, []);
          for (const w of who) {
            const summary = await ledger.accountSummary(t.db, clock, w.accountId, [w.keyId]);
            assert.ok(summary.balance >= 0, 'balance never negative');
            if (w.cap !== null) assert.ok(summary.keySpendThisMonth[w.keyId] <= w.cap, 'key cap never passed');
          }
          const acc = await t.db('accounts').select('id', 'llm_allowance');
          for (const a of acc) {
            const s = await ledger.accountSummary(t.db, clock, a.id, []);
            assert.ok(s.llmAllowanceUsed <= Number(a.llm_allowance), 'allowance never passed');
          }
        } finally {
          await t.close();
        }
      }),
      { numRuns: 40 },
    );
  });

  it('when two processes’ connections reserve on one database at once, then the balance is never overdrawn', async () => {
    const t = await openTestDb();
    const other = await openDb(await dbOptionsFor(t.dir));
    try {
      const clock = new ManualClock(new Date('2026-11-10T00:00:00Z'));
      const { accountId, keyId } = await makeAccountWithKey(t.db, clock);
      await ledger.credit(t.db, clock, accountId, 100, 'grant');
      const attempt = (db: typeof t.db) =>
        ledger.reserve(db, clock, { accountId, keyId, purpose: 'media', amount: 7 }).then(
          () => 1,
          (e: unknown) => {
            if (answerOf(e)?.code === 'INSUFFICIENT_GEMS') return 0;
            throw e;
          },
        );
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => attempt(i % 2 ? other : t.db)));
      assert.equal(
        results.reduce((a: number, b) => a + b, 0),
        14,
        '14 × 7 = 98 ≤ 100',
      );
      assert.equal(await ledger.balanceOf(t.db, accountId), 2);
      assert.equal((await verifyLedger(t.db)).ok, true);
    } finally {
      await other.destroy();
      await t.close();
    }
  });

  it('when settlements commit while reservations check a full key cap and allowance, then neither is ever passed', async () => {
    // A settlement moves Gems from "held" to "charged this month" in one commit; a
    // reservation that read the two sums at different moments could miss them.
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-11-10T00:00:00Z'));
      for (let round = 0; round < 15; round++) {
        const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 12, llmAllowance: 12 });
        const held = [];
        for (let i = 0; i < 6; i++) held.push(await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'llm', amount: 2 }));
        const refused = (e: unknown) => {
          if (answerOf(e)?.status === 402) return 0;
          throw e;
        };
        const results = await Promise.all([
          ...held.map((r) => ledger.settle(t.db, clock, r.id, 2).then(() => 0)),
          ...Array.from({ length: 12 }, () => ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'llm', amount: 1 }).then(() => 1, refused)),
        ]);
        assert.equal(
          results.reduce((a: number, b) => a + b, 0),
          0,
          `round ${round}: a reservation passed the full cap`,
        );
        const summary = await ledger.accountSummary(t.db, clock, accountId, [keyId]);
        assert.equal(summary.keySpendThisMonth[keyId], 12);
        assert.equal(summary.llmAllowanceUsed, 12);
      }
    } finally {
      await t.close();
    }
  });
});

describe('holds decided as the transaction commits (Postgres by gemforge_guard(), SQLite by guarded moves)', () => {
  const clock = new ManualClock(new Date('2026-11-10T00:00:00Z'));
  let n = 0;
  /** A media submission's claim and hold, as spend.inSubmission runs them (atCommit first, the long way after a refusal). */
  const submit = (db: Db, accountId: string, keyId: string, amount: number) => {
    const id = `rsv_test_${n++}`;
    return spend.inSubmission(db, clock, { keyId, accountId, idemKey: id, operation: 'createImage', fingerprint: 'f' }, async ({ claim, hold }) => {
      await claim({ state: 'completed', ref: `task_${id}`, reservationId: id });
      await hold({ purpose: 'media', amount, id });
    });
  };
  const counted = (p: Promise<unknown>) =>
    p.then(
      () => 1,
      (e: unknown) => {
        if (answerOf(e)?.status === 402) return 0;
        throw e;
      },
    );

  it('when the balance or the key cap cannot cover a hold, then the spec error names the rule, and nothing of the claim or the hold is kept', async () => {
    const t = await openTestDb();
    try {
      const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 10 });
      await ledger.credit(t.db, clock, accountId, 20, 'grant');
      await submit(t.db, accountId, keyId, 6);
      await rejects(
        submit(t.db, accountId, keyId, 5),
        402,
        'API_KEY_LIMIT',
        /6 Gems are already charged this UTC month or held, and this request needs 5 Gems \(4 Gems left\)/,
      );
      const other = await makeAccountWithKey(t.db, clock);
      await ledger.credit(t.db, clock, other.accountId, 3, 'grant');
      await rejects(submit(t.db, other.accountId, other.keyId, 4), 402, 'INSUFFICIENT_GEMS', /balance of 3 Gems cannot cover this request, which needs 4 Gems/);
      assert.equal(await ledger.balanceOf(t.db, accountId), 14);
      assert.equal(await ledger.balanceOf(t.db, other.accountId), 3);
      assert.equal(Number((await t.db('idempotency_records').count({ n: '*' }))[0].n), 1, 'only the hold that passed claimed its identity');
      assert.equal(Number((await t.db('reservations').count({ n: '*' }))[0].n), 1);
      assert.equal((await verifyLedger(t.db)).ok, true);
    } finally {
      await t.close();
    }
  });

  it(
    "when a hold passes on Postgres, a new key's first one too, then its transaction sends the BEGIN, the claim and the COMMIT (the writes and the hold wait for it: no lock or read of the balance rows before; the key's balance row was made with the key)",
    { skip: process.env.TEST_DATABASE_URL ? false : 'needs Postgres (npm run test:postgres)' },
    async () => {
      const t = await openTestDb();
      try {
        const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 100 });
        await ledger.credit(t.db, clock, accountId, 100, 'grant');
        for (const amount of [1, 2]) {
          const sent: string[] = [];
          const stop = onStatement(t.db, (sql) => sent.push(sql));
          await submit(t.db, accountId, keyId, amount);
          stop();
          assert.equal(sent.length, 3, sent.join('\n'));
          assert.match(sent[0], /^BEGIN/);
          assert.match(sent[1], /^insert into "idempotency_records"/);
          assert.match(sent[2], /^COMMIT/);
        }
        assert.equal(await ledger.balanceOf(t.db, accountId), 97);
        assert.equal((await ledger.accountSummary(t.db, clock, accountId, [keyId])).keySpendThisMonth[keyId], 3);
        assert.equal((await verifyLedger(t.db)).ok, true);
      } finally {
        await t.close();
      }
    },
  );

  it('when holds of one account race from two processes while settlements commit, then neither the balance nor the key cap is ever passed', async () => {
    const t = await openTestDb();
    const other = await openDb(await dbOptionsFor(t.dir));
    try {
      for (let round = 0; round < 5; round++) {
        // The key cap (50) binds before the balance (100): 7 holds of 7; then a second key on the balance alone.
        const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 50 });
        await ledger.credit(t.db, clock, accountId, 100, 'grant');
        const first = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 7 });
        const results = await Promise.all([
          ledger.settle(other, clock, first.id, 7).then(() => 0), // held → charged this month: the key's spend stays 7
          ...Array.from({ length: 20 }, (_, i) => counted(submit(i % 2 ? other : t.db, accountId, keyId, 7))),
        ]);
        assert.equal(
          results.reduce((a: number, b) => a + b, 0),
          6,
          `round ${round}: 7 holds of 7 fit the cap of 50`,
        );
        const summary = await ledger.accountSummary(t.db, clock, accountId, [keyId]);
        assert.equal(summary.keySpendThisMonth[keyId], 49);
        assert.equal(await ledger.balanceOf(t.db, accountId), 51);
      }
      assert.equal((await verifyLedger(t.db)).ok, true);
    } finally {
      await other.destroy();
      await t.close();
    }
  });
});
