/** The running figures beside the ledger: always equal to what the ledger rows give, and read in constant work. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as ledger from '../../server/domain/ledger.ts';
import { verifyLedger } from '../../server/domain/ledger-verify.ts';
import { createKey } from '../../server/domain/accounts.ts';
import { answerOf } from '../../server/http/error-map.ts';
import { fillBalances } from '../../server/storage/balances.ts';
import { fill as fillAtMigration } from '../../server/storage/migrations/006_balances.ts';
import { onStatement, type Db } from '../../server/storage/db.ts';
import { ManualClock, makeAccountWithKey, openTestDb } from '../helpers/db.ts';

type Step =
  | { kind: 'reserve'; who: number; purpose: 'media' | 'llm'; amount: number }
  | { kind: 'settle'; pick: number; fraction: number }
  | { kind: 'release'; pick: number }
  | { kind: 'credit'; who: number; amount: number }
  | { kind: 'days'; days: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('reserve' as const), who: fc.nat(4), purpose: fc.constantFrom('media' as const, 'llm' as const), amount: fc.nat(40) }),
  fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1.2, noNaN: true }) }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('credit' as const), who: fc.nat(4), amount: fc.integer({ min: -30, max: 60 }) }),
  fc.record({ kind: fc.constant('days' as const), days: fc.integer({ min: 1, max: 40 }) }),
);

/** Every running figure against the ledger rows; the problems verify reports about them. */
async function figureProblems(db: Db): Promise<string[]> {
  const report = await verifyLedger(db);
  return report.problems;
}

/** SQLite reports its statements shortly after they ran: waits for those of the steps before. */
const reported = () => new Promise((r) => setTimeout(r, 50));

/** Counts the SQL statements `fn` sends. */
async function statements(db: Db, fn: () => Promise<unknown>): Promise<number> {
  let n = 0;
  const stop = onStatement(db, () => n++);
  try {
    await fn();
    await reported();
  } finally {
    stop();
  }
  return n;
}

describe('running balances (property)', () => {
  it('when random reserves, settles, releases and credits run over several keys and months, then after every step the running figures equal the recomputed ones', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 30 }), async (steps) => {
        const t = await openTestDb();
        try {
          const clock = new ManualClock(new Date('2026-01-20T10:00:00Z'));
          const a0 = await makeAccountWithKey(t.db, clock, { cap: 90, llmAllowance: 25, paidConsent: true });
          const a1 = await makeAccountWithKey(t.db, clock, { llmAllowance: 10 });
          const k1 = (await createKey(t.db, clock, 'gf', { accountId: a0.accountId, name: 'k1', scopes: ['generate'], monthlyCap: 30 })).key.id;
          const who = [
            { accountId: a0.accountId, keyId: a0.keyId },
            { accountId: a0.accountId, keyId: k1 },
            { accountId: a0.accountId, keyId: null },
            { accountId: a1.accountId, keyId: a1.keyId },
            { accountId: a1.accountId, keyId: null },
          ];
          await ledger.credit(t.db, clock, a0.accountId, 80, 'grant');
          const held: Array<{ id: string; total: number }> = [];
          for (const [i, step] of steps.entries()) {
            try {
              if (step.kind === 'reserve') {
                const r = await ledger.reserve(t.db, clock, { ...who[step.who], purpose: step.purpose, amount: step.amount });
                held.push({ id: r.id, total: r.hold_allowance + r.hold_paid });
              } else if ((step.kind === 'settle' || step.kind === 'release') && held.length) {
                const [r] = held.splice(step.pick % held.length, 1);
                if (step.kind === 'settle') await ledger.settle(t.db, clock, r.id, Math.floor(r.total * step.fraction));
                else await ledger.release(t.db, clock, r.id);
              } else if (step.kind === 'credit') {
                await ledger.credit(t.db, clock, who[step.who].accountId, step.amount, 'grant');
              } else if (step.kind === 'days') {
                clock.advance(step.days * 24 * 3600 * 1000);
              }
            } catch (e) {
              // Refusals (402/409) and a debit below zero move nothing; anything else is a bug.
              if (!answerOf(e) && !/cannot go below zero/.test(String(e))) throw e;
            }
            assert.deepEqual(await figureProblems(t.db), [], `after step ${i}: ${JSON.stringify(step)}`);
          }
        } finally {
          await t.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});

describe('running balances', () => {
  it('when a stored figure is tampered with, then verify names the table, the row and both values', async () => {
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));
      const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 100 });
      await ledger.credit(t.db, clock, accountId, 50, 'grant');
      const r = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 10 });
      await ledger.settle(t.db, clock, r.id, 6);
      assert.deepEqual(await figureProblems(t.db), []);
      await t.db('account_balances').where({ account_id: accountId }).update({ credited: 51 });
      await t.db('key_months').where({ key_id: keyId }).update({ posted: 7 });
      const problems = await figureProblems(t.db);
      assert.ok(problems.includes(`account_balances ${accountId}: credited is 51, the ledger rows give 50`), problems.join('\n'));
      assert.ok(problems.includes(`key_months ${keyId} 2026-11: posted is 7, the ledger rows give 6`), problems.join('\n'));
    } finally {
      await t.close();
    }
  });

  it('when the figures are refilled from the ledger rows (migration 006 on an existing database), then they equal what the operations left', async () => {
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-10-30T12:00:00Z'));
      const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { llmAllowance: 5, paidConsent: true });
      await ledger.credit(t.db, clock, accountId, 40, 'grant');
      const a = await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'llm', amount: 9 });
      await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 3 });
      clock.advance(5 * 24 * 3600 * 1000);
      await ledger.settle(t.db, clock, a.id, 7);
      const before = await snapshot(t.db);
      await fillBalances(t.db);
      assert.deepEqual(await snapshot(t.db), before);
      // The migration's own frozen copy of the fill gives the same figures.
      for (const table of ['key_months', 'key_balances', 'account_months', 'account_balances']) await t.db(table).delete();
      await fillAtMigration(t.db);
      assert.deepEqual(await snapshot(t.db), before);
      assert.equal(await ledger.balanceOf(t.db, accountId), 40 - 3 - 2);
    } finally {
      await t.close();
    }
  });

  it('when an account has a long history, then a reservation and its settlement send as many statements as for an account with one', async () => {
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));
      const cycle = async (who: { accountId: string; keyId: string }) => {
        let id = '';
        const reserving = await statements(t.db, async () => {
          id = (await ledger.reserve(t.db, clock, { ...who, purpose: 'media', amount: 2 })).id;
        });
        const settling = await statements(t.db, () => ledger.settle(t.db, clock, id, 1));
        return [reserving, settling];
      };
      const fresh = await makeAccountWithKey(t.db, clock, { cap: 100_000 });
      const busy = await makeAccountWithKey(t.db, clock, { cap: 100_000 });
      await ledger.credit(t.db, clock, fresh.accountId, 10, 'grant');
      await ledger.credit(t.db, clock, busy.accountId, 1000, 'grant');
      await cycle(fresh); // its key's first movement creates the key's balance row
      // The history itself is not counted: counting waits for SQLite's statement reports after each step.
      for (let i = 0; i < 60; i++) {
        const { id } = await ledger.reserve(t.db, clock, { ...busy, purpose: 'media', amount: 2 });
        await ledger.settle(t.db, clock, id, 1);
      }
      await reported(); // not counted as the next cycle's
      const long = await cycle(busy);
      assert.ok(
        long.every((n) => n > 0),
        `statements counted: ${long.join(', ')}`,
      );
      assert.deepEqual(long, await cycle(fresh));
    } finally {
      await t.close();
    }
  });
});

async function snapshot(db: Db) {
  const out: Record<string, unknown[]> = {};
  for (const table of ['account_balances', 'account_months', 'key_balances', 'key_months']) {
    out[table] = (await db(table).select('*'))
      .map((row: Record<string, unknown>) =>
        Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v])),
      )
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
  }
  return out;
}
