/**
 * A completion's settlement made at once (SQLite: one INSERT into the view
 * `settle_completion`, whose trigger makes the writes, migration 022) and the same
 * settlement made step by step (the transaction it falls back to) write the same rows:
 * every table the completion changes, the same columns, values and types (SQLite's
 * `quote()` tells 4 from 4.0 and '4'), its ids and times aside. Each shape is asked
 * twice, by two accounts made alike: once as it runs, once with the statement made to
 * fail, which sends the settlement the step-by-step way. A settlement that must not
 * happen (made twice, its record or its hold moved meanwhile) is refused alike, with
 * the same error, and changes nothing either way; the statement itself refuses with the
 * guards' words, so its refusal is told apart as the transaction's is.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { tableRows } from './helpers/table-rows.ts';
import { isSqlite } from '../server/storage/db.ts';
import { databaseFaults, guardRefusal } from '../server/storage/engine/query.ts';
import { systemClock } from '../server/domain/clock.ts';
import { newId } from '../server/domain/ids.ts';
import * as idem from '../server/domain/idempotency.ts';
import * as ledger from '../server/domain/ledger.ts';
import * as spend from '../server/domain/spend.ts';
import * as procedures from '../server/storage/procedures.ts';

/** The procedure's statement name (storage/procedures.ts), and the step-by-step settlement's first write. */
const AT_ONCE = 'settle-completion';
const STEP = /^idempotency-transition/;
/** Not the settlement's writes: the admission's token take, and the key's last use, stamped in the background whenever it comes. */
const NOT_COMPARED = new Set(['rate_buckets', 'api_keys']);
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const PATH = '/api/generate/text/v1/chat/completions';

describe('a completion settled at once or step by step', () => {
  let s: TestServer;
  /** The statements run while a request is answered, by name. */
  let ran: string[] = [];
  let stepByStep = false;
  before(async () => {
    s = await startTestServer();
    databaseFaults.statement = (name) => {
      ran.push(name);
      if (stepByStep && name === AT_ONCE) throw new Error('made to fail: the settlement goes step by step');
    };
  });
  after(async () => {
    databaseFaults.statement = undefined;
    await s.close();
  });

  const rows = () => tableRows(s.db, NOT_COMPARED);

  /** `text` with `ids` named by their role, times blanked, and the completion's `created` second blanked. */
  const named = (ids: Record<string, string>, text: string) =>
    Object.entries(ids)
      .reduce((t, [role, id]) => t.replaceAll(id, `<${role}>`), text.replace(TIME, '<time>'))
      .replace(/(\\?"created\\?":)\d+/g, '$1<created>');

  /** The rows `act` added or removed (a changed row is both), unnamed; row ids count up across the database and are blanked. */
  async function changes(act: () => Promise<void>): Promise<string[]> {
    const before = await rows();
    await act();
    const after = await rows();
    const out: string[] = [];
    for (const [table, now] of after) {
      const was = new Set(before.get(table) ?? []);
      const is = new Set(now);
      for (const r of now) if (!was.has(r)) out.push(`${table} + ${r.replace(/"id":"(\d+)"/g, '"id":"<id>"')}`);
      for (const r of was) if (!is.has(r)) out.push(`${table} - ${r.replace(/"id":"(\d+)"/g, '"id":"<id>"')}`);
    }
    return out;
  }

  interface Outcome {
    status: number;
    body: string;
    changes: string[];
    ran: string[];
  }

  type User = { gems?: number; llmAllowance?: number; paidConsent?: boolean; cap?: number };

  /** Asks for `body` for a fresh account made by `user`, settled at once or (`stepByStep`) the statement made to fail. */
  async function completed(body: object, user: User, stepByStep_: boolean): Promise<Outcome> {
    const u = await s.user(user);
    const ids: Record<string, string> = { account: u.accountId, key: u.keyId };
    let status = 0;
    let text = '';
    ran = [];
    stepByStep = stepByStep_;
    const changed = await changes(async () => {
      try {
        const res = await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': 'at-once-or-step-by-step' } });
        status = res.status;
        text = await res.text(); // a stream ends after its settlement
      } finally {
        stepByStep = false;
      }
    });
    const seen = ran;
    const record = (await s.db('idempotency_records').where({ key_id: u.keyId }).first('reservation_id', 'ref')) as
      { reservation_id?: string; ref?: string } | undefined;
    if (record?.reservation_id) ids.reservation = record.reservation_id;
    if (record?.ref) ids.completion = record.ref;
    return { status, body: named(ids, text), changes: changed.map((c) => named(ids, c)).sort(), ran: seen };
  }

  /** The shape both ways: the same answer, the same rows changed, the first way settled in one statement. */
  async function bothWays(body: object, user: User, status = 200): Promise<Outcome> {
    const fast = await completed(body, user, false);
    const slow = await completed(body, user, true);
    assert.equal(fast.status, status, fast.body);
    assert.equal(slow.status, fast.status, slow.body);
    assert.equal(slow.body, fast.body);
    assert.deepEqual(slow.changes, fast.changes);
    assert.ok(fast.ran.includes(AT_ONCE) && !fast.ran.some((n) => STEP.test(n)), `settled at once: ${fast.ran.join(', ')}`);
    assert.ok(slow.ran.includes(AT_ONCE) && slow.ran.some((n) => STEP.test(n)), `the fallback settles step by step: ${slow.ran.join(', ')}`);
    return fast;
  }

  const ask = (extra: object = {}) => ({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 16, ...extra });
  const tablesOf = (o: Outcome) => new Set(o.changes.map((c) => c.split(' ')[0]));
  /** The settlement's entries as `type allowance paid`. */
  const entries = (changes: string[]) =>
    changes
      .filter((c) => c.startsWith('ledger_entries +'))
      .map((c) => JSON.parse(c.slice('ledger_entries + '.length)) as Record<string, string>)
      .map((e) => `${e.type} ${e.allowance} ${e.paid}`)
      .sort();

  it('when a completion is paid from the allowance, from paid Gems or from both, JSON or streamed, then both ways write the same record, reservation, entries and balances', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only: Postgres has no settlement procedure (storage/procedures.ts)');
    for (const stream of [false, true]) {
      const allowance = await bothWays(ask({ stream }), { llmAllowance: 1000 });
      // The pending moves of the hold and of its settlement cancel out: key_balances and (allowance) account_balances end as they began.
      for (const table of ['idempotency_records', 'reservations', 'ledger_entries', 'account_months', 'account_days', 'key_months']) {
        assert.ok(tablesOf(allowance).has(table), `${table} written: ${allowance.changes.join('\n')}`);
      }
      assert.deepEqual(entries(allowance.changes), ["'hold' 1 0", "'post' 1 0", "'void' 0 0"]);
      const paid = await bothWays(ask({ stream }), { llmAllowance: 0, paidConsent: true });
      assert.deepEqual(entries(paid.changes), ["'hold' 0 1", "'post' 0 1", "'void' 0 0"]);
      assert.ok(tablesOf(paid).has('account_balances'), 'the paid Gem posted');
      // A hold of 1 allowance Gem and the rest paid; the charge takes the allowance first and releases the rest.
      const split = await bothWays(ask({ stream, max_tokens: 2000 }), { llmAllowance: 1, paidConsent: true });
      const [hold] = entries(split.changes).filter((e) => e.startsWith("'hold'"));
      assert.match(hold, /^'hold' 1 [1-9]\d*$/, split.changes.join('\n'));
    }
  });

  it('when the key has a monthly cap, or the settlement charges less than was held, then both ways write the same rows (the rest released)', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const capped = await bothWays(ask(), { llmAllowance: 1000, cap: 100 });
    assert.ok(tablesOf(capped).has('key_months'));
    for (const stream of [false, true]) {
      const less = await bothWays(ask({ stream, max_tokens: 2000 }), { llmAllowance: 1000 });
      const voided = entries(less.changes).find((e) => e.startsWith("'void'"));
      assert.match(voided!, /^'void' [1-9]\d* 0$/, `the rest of the hold released: ${less.changes.join('\n')}`);
    }
  });

  it('when a completion fails part-way, then both ways bill its usage and retain the failure alike', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const failed = await bothWays(ask({ messages: [{ role: 'user', content: '[[scenario:stream-error:2]] fail' }] }), { llmAllowance: 1000 }, 502);
    assert.match(failed.body, /PROVIDER_ERROR/);
    assert.ok(
      failed.changes.some((c) => c.startsWith('idempotency_records +') && c.includes('PROVIDER_ERROR')),
      failed.changes.join('\n'),
    );
  });

  // ---- Settlements that must not happen: the guards ---------------------------------------------------------------

  /** A pending identity holding `amount` Gems of a fresh account, as a completion's submission leaves it. */
  async function claimed(amount = 3, user: User = { llmAllowance: 1000 }): Promise<spend.Claim> {
    const u = await s.user(user);
    const ref = newId('chatcmpl');
    const reservationId = newId('rsv');
    const identity = { keyId: u.keyId, accountId: u.accountId, idemKey: newId('idem'), operation: 'createChatCompletion', fingerprint: 'f' };
    const submitted = await spend.inSubmission(s.db, systemClock, identity, async ({ claim, hold }) => {
      await claim({ state: 'pending', ref, reservationId });
      return hold({ purpose: 'llm', kind: 'text', amount, ref, id: reservationId });
    });
    assert.ok(submitted.created);
    return { identity, reservationId, reserved: amount, ref, held: submitted.value };
  }

  /** `act` both ways: the error each throws (the same), and the rows it changed (none). */
  async function refusedBothWays(prepare: (claim: spend.Claim) => Promise<void>): Promise<string> {
    const messages: string[] = [];
    for (const way of [false, true]) {
      const claim = await claimed();
      await prepare(claim);
      let message = '';
      ran = [];
      stepByStep = way;
      const changed = await changes(async () => {
        try {
          await spend.billAndRetain(s.db, systemClock, claim, 2, { answer: '{"answer":true}' });
        } catch (error) {
          message = (error as Error).message;
        } finally {
          stepByStep = false;
        }
      });
      assert.ok(ran.includes(AT_ONCE), ran.join(', '));
      assert.deepEqual(changed, [], 'nothing written');
      messages.push(message.replaceAll(claim.identity.idemKey, '<idem>').replaceAll(claim.reservationId, '<reservation>'));
    }
    assert.ok(messages[0], 'refused');
    assert.equal(messages[1], messages[0]);
    return messages[0]!;
  }

  /** A hold of `amount` settled charging `charge` both ways: the same rows changed, the first way at once. */
  async function settledBothWays(amount: number, charge: number, user: User): Promise<string[]> {
    const out: string[][] = [];
    for (const way of [false, true]) {
      const claim = await claimed(amount, user);
      const ids = { account: claim.identity.accountId, key: claim.identity.keyId, reservation: claim.reservationId, completion: claim.ref };
      ran = [];
      stepByStep = way;
      const changed = await changes(async () => {
        try {
          await spend.billAndRetain(s.db, systemClock, claim, charge, { answer: JSON.stringify({ id: claim.ref }) });
        } finally {
          stepByStep = false;
        }
      });
      assert.equal(
        ran.some((n) => STEP.test(n)),
        way,
        ran.join(', '),
      );
      out.push(changed.map((c) => named(ids, c).replace(claim.identity.idemKey, '<idem>')).sort());
    }
    assert.deepEqual(out[1], out[0]);
    return out[0]!;
  }

  it('when a hold of allowance and paid Gems is charged across both, not at all, or above the hold, then both ways write the same rows', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const split = { llmAllowance: 1, paidConsent: true };
    assert.deepEqual(entries(await settledBothWays(3, 2, split)), ["'post' 1 1", "'void' 0 1"]);
    assert.deepEqual(entries(await settledBothWays(3, 0, split)), ["'void' 1 2"]);
    assert.deepEqual(entries(await settledBothWays(3, 5, split)), ["'post' 1 2", "'void' 0 0"]);
    const capped = await settledBothWays(3, 2, { ...split, cap: 10 });
    assert.ok(capped.some((c) => c.startsWith('key_months +')) && capped.some((c) => c.startsWith('key_balances +')), capped.join('\n'));
  });

  it('when a completion is settled twice, or its record or its hold moved meanwhile, then both ways refuse alike and write nothing', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const twice = await refusedBothWays((claim) => spend.billAndRetain(s.db, systemClock, claim, 1, { answer: '{}' }));
    assert.match(twice, /was not pending/);
    const released = await refusedBothWays(
      async (claim) => void (await idem.operatorRelease(s.db, systemClock, claim.identity.keyId, claim.identity.idemKey, { pending: true })),
    );
    assert.match(released, /was not pending/);
    const closed = await refusedBothWays(async (claim) => void (await ledger.release(s.db, systemClock, claim.reservationId)));
    assert.match(closed, /closed concurrently/);
  });

  it('when the statement meets a record no longer pending or a hold no longer held, then it refuses with the guards’ words and writes nothing', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const rowsOf = (claim: spend.Claim) => {
      const { closing, entries: settled, movement } = ledger.settlementRows(systemClock, claim.held!, 2);
      const record = {
        key_id: claim.identity.keyId,
        idem_key: claim.identity.idemKey,
        ...idem.completion(systemClock, { ref: claim.ref, retained: { answer: '{}' } }),
      };
      return { record, reservation: { id: claim.reservationId, ...closing }, entries: settled, movement };
    };
    const refusal = async (claim: spend.Claim) => {
      let refused: unknown;
      const changed = await changes(async () => {
        await procedures.settleCompletionAtOnce(s.db, rowsOf(claim)).catch((error: unknown) => void (refused = error));
      });
      assert.deepEqual(changed, [], 'nothing written');
      return guardRefusal(refused);
    };
    const twice = await claimed();
    assert.equal(await procedures.settleCompletionAtOnce(s.db, rowsOf(twice)), true);
    assert.equal(await refusal(twice), 'idempotency record moved');
    const closed = await claimed();
    await ledger.release(s.db, systemClock, closed.reservationId);
    assert.equal(await refusal(closed), 'reservation not held');
  });
});
