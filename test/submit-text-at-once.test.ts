/**
 * A chat completion's reservation made at once (SQLite: one INSERT into the view
 * `submit_text`, whose trigger takes the admission's tokens, claims the identity and
 * holds the Gems, splitting them between the allowance and paid Gems itself, migration
 * 023) and the same reservation made the way it was before (the transaction it falls
 * back to: the tokens and the claim, the figures read, the split decided in JS, the
 * hold's writes with the COMMIT) write the same rows: every table, the same columns,
 * values and types (SQLite's `quote()` tells 4 from 4.0 and '4'), its ids and times
 * aside. Each shape is asked twice, by two accounts made alike: once as it runs, once
 * with the statement made to fail before it runs, which is the way before. Refusals
 * (a rule of the hold, an empty bucket) and replays (every state of an identity
 * claimed before) answer the same, status, code, message and Retry-After, and write
 * the same (nothing, or the same tokens); the statement that refused wrote nothing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { tableRows } from './helpers/table-rows.ts';
import { isSqlite } from '../server/storage/db.ts';
import { databaseFaults } from '../server/storage/engine/query.ts';
import { systemClock } from '../server/domain/clock.ts';
import { newId } from '../server/domain/ids.ts';
import { admitAtClaim, tokensAtOnce, type AdmissionLimits } from '../server/domain/admission.ts';
import type { Principal } from '../server/domain/accounts.ts';
import * as spend from '../server/domain/spend.ts';

/** The procedure's statement name (storage/procedures.ts), and the claim of the way before. */
const AT_ONCE = 'submit-text';
const CLAIM = 'idempotency-insert';
/** Not the completion's writes: the key's last use, stamped in the background whenever it comes. */
const NOT_COMPARED = new Set(['api_keys']);
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const PATH = '/api/generate/text/v1/chat/completions';
/** The test server's text rates (config.ts defaults). */
const LIMITS: AdmissionLimits = { rates: { keyMedia: 50, keyText: 50, accountMedia: 100, accountText: 100, burstSeconds: 20 }, accountQueuedTasks: 0 };

type User = { gems?: number; llmAllowance?: number; paidConsent?: boolean; cap?: number };
type Made = { accountId: string; keyId: string; secret: string };

describe("a chat completion's reservation made at once or the way before", () => {
  let s: TestServer;
  /** The statements run while a request is answered, by name. */
  let ran: string[] = [];
  let wayBefore = false;
  before(async () => {
    s = await startTestServer();
    databaseFaults.statement = (name) => {
      ran.push(name);
      if (wayBefore && name === AT_ONCE) throw new Error('made to fail: the reservation goes the way before');
    };
  });
  after(async () => {
    databaseFaults.statement = undefined;
    await s.close();
  });

  const rows = () => tableRows(s.db, NOT_COMPARED);

  /** `text` with `ids` named by their role, times and bucket times blanked, and the completion's `created` second blanked. */
  const named = (ids: Record<string, string>, text: string) =>
    Object.entries(ids)
      .reduce((t, [role, id]) => t.replaceAll(id, `<${role}>`), text.replace(TIME, '<time>'))
      .replace(/(\\?"created\\?":)\d+/g, '$1<created>')
      .replace(/"at_ms":"\d+"/g, '"at_ms":"<ms>"');

  /** The rows `act` added or removed (a changed row is both); row ids count up across the database and are blanked. */
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
    retryAfter: string | null;
    body: string;
    changes: string[];
    ran: string[];
  }

  const IDEM = 'at-once-or-the-way-before';

  /**
   * Asks for `body` for a fresh account made by `user` (after `prepare`, given it), the statement run or
   * (`before_`) made to fail before it runs.
   */
  async function asked(body: object, user: User, before_: boolean, prepare?: (u: Made) => Promise<void>): Promise<Outcome> {
    const u = await s.user(user);
    await prepare?.(u);
    const ids: Record<string, string> = { account: u.accountId, key: u.keyId };
    let status = 0;
    let retryAfter: string | null = null;
    let text = '';
    ran = [];
    wayBefore = before_;
    const changed = await changes(async () => {
      try {
        const res = await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': IDEM } });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        text = await res.text(); // a stream ends after its settlement
      } finally {
        wayBefore = false;
      }
    });
    const seen = [...ran]; // the next request's statements go to a new list
    const record = (await s.db('idempotency_records').where({ key_id: u.keyId, idem_key: IDEM }).first('reservation_id', 'ref')) as
      { reservation_id?: string; ref?: string } | undefined;
    if (record?.reservation_id) ids.reservation = record.reservation_id;
    if (record?.ref) ids.completion = record.ref;
    return { status, retryAfter, body: named(ids, text), changes: changed.map((c) => named(ids, c)).sort(), ran: seen };
  }

  /** The shape both ways: the same answer and the same rows changed; `atOnce`: whether the first way made it in the statement. */
  async function bothWays(
    body: object,
    user: User,
    expect: { status: number; atOnce: boolean; tried?: boolean },
    prepare?: (u: Made) => Promise<void>,
  ): Promise<Outcome> {
    const fast = await asked(body, user, false, prepare);
    const slow = await asked(body, user, true, prepare);
    assert.equal(fast.status, expect.status, fast.body);
    assert.equal(slow.status, fast.status, slow.body);
    assert.equal(slow.retryAfter, fast.retryAfter);
    assert.equal(slow.body, fast.body);
    assert.deepEqual(slow.changes, fast.changes);
    if (expect.atOnce) {
      assert.ok(fast.ran.includes(AT_ONCE) && !fast.ran.includes(CLAIM), `made at once: ${fast.ran.join(', ')}`);
      assert.ok(slow.ran.includes(CLAIM), `the way before claims in its transaction: ${slow.ran.join(', ')}`);
    } else {
      // Tried and refused (it wrote nothing: the rows match the way before, which never ran it), or not tried at all.
      assert.equal(fast.ran.includes(AT_ONCE), expect.tried ?? true, fast.ran.join(', '));
    }
    return fast;
  }

  const ask = (extra: object = {}) => ({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 16, ...extra });
  const tablesOf = (o: Outcome) => new Set(o.changes.map((c) => c.split(' ')[0]));
  /** The entries written, as `type allowance paid`. */
  const entries = (changes: string[]) =>
    changes
      .filter((c) => c.startsWith('ledger_entries +'))
      .map((c) => JSON.parse(c.slice('ledger_entries + '.length)) as Record<string, string>)
      .map((e) => `${e.type} ${e.allowance} ${e.paid}`)
      .sort();

  it('when a completion is paid from the allowance, from paid Gems or from both, JSON or streamed, under a key cap or after earlier use, then both ways write the same tokens, claim, reservation, entries and balances', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only: Postgres has no procedures (storage/procedures.ts)');
    for (const stream of [false, true]) {
      const allowance = await bothWays(ask({ stream }), { llmAllowance: 1000 }, { status: 200, atOnce: true });
      for (const table of ['rate_buckets', 'idempotency_records', 'reservations', 'ledger_entries', 'account_months', 'account_days', 'key_months']) {
        assert.ok(tablesOf(allowance).has(table), `${table} written: ${allowance.changes.join('\n')}`);
      }
      assert.deepEqual(entries(allowance.changes), ["'hold' 1 0", "'post' 1 0", "'void' 0 0"]);
      const paid = await bothWays(ask({ stream }), { llmAllowance: 0, paidConsent: true }, { status: 200, atOnce: true });
      assert.deepEqual(entries(paid.changes), ["'hold' 0 1", "'post' 0 1", "'void' 0 0"]);
      // A hold of the one allowance Gem left and the rest paid.
      const split = await bothWays(ask({ stream, max_tokens: 2000 }), { llmAllowance: 1, paidConsent: true }, { status: 200, atOnce: true });
      const [hold] = entries(split.changes).filter((e) => e.startsWith("'hold'"));
      assert.match(hold, /^'hold' 1 [1-9]\d*$/, split.changes.join('\n'));
    }
    await bothWays(ask({ max_tokens: 2000 }), { llmAllowance: 1000, cap: 100 }, { status: 200, atOnce: true });
    // The allowance partly used this month (1 posted) and partly held by an open completion (2): the 2 left are split off.
    const used = async (u: Made) => {
      const held = await s.call('POST', PATH, { key: u.secret, body: ask(), headers: { 'idempotency-key': 'earlier' } });
      assert.equal(held.status, 200);
      await held.text();
      const ref = newId('chatcmpl');
      const reservationId = newId('rsv');
      const identity = { keyId: u.keyId, accountId: u.accountId, idemKey: 'open', operation: 'createChatCompletion', fingerprint: 'f' };
      await spend.inSubmission(s.db, systemClock, identity, async ({ claim, hold }) => {
        await claim({ state: 'pending', ref, reservationId });
        return hold({ purpose: 'llm', kind: 'text', amount: 2, ref, id: reservationId });
      });
    };
    const partly = await bothWays(ask({ max_tokens: 2000 }), { llmAllowance: 5, paidConsent: true }, { status: 200, atOnce: true }, used);
    const [hold] = entries(partly.changes).filter((e) => e.startsWith("'hold'"));
    assert.match(hold, /^'hold' 2 [1-9]\d*$/, partly.changes.join('\n'));
  });

  it('when the allowance is exhausted without consent, the account short of Gems, the key at or past its cap or its bucket empty, then both ways refuse alike, with the same Retry-After, and write the same', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const refusals: Array<[User, string, number]> = [
      [{ llmAllowance: 0 }, 'LLM_QUOTA_EXHAUSTED', 402],
      [{ llmAllowance: 0, paidConsent: true, gems: 1 }, 'LLM_QUOTA_EXHAUSTED', 402],
      [{ llmAllowance: 1, paidConsent: true, gems: 1 }, 'LLM_QUOTA_EXHAUSTED', 402],
      [{ llmAllowance: 1000, cap: 2 }, 'API_KEY_LIMIT', 402],
      [{ llmAllowance: 1000, cap: 0 }, 'API_KEY_LIMIT', 402],
    ];
    for (const [user, code, status] of refusals) {
      const refused = await bothWays(ask({ max_tokens: 2000 }), user, { status, atOnce: false });
      assert.match(refused.body, new RegExp(code), JSON.stringify(user));
      assert.deepEqual(refused.changes, [], `nothing written: ${JSON.stringify(user)}`);
    }
    // The key's bucket empty until well after the test: its refusal says how long to wait; the account's bucket
    // gives its token either way (the way before's rule: `takeTokens`).
    const empty = async (u: Made) => {
      await s.db('rate_buckets').insert({ id: `key:${u.keyId}:text`, tokens: 0, at_ms: Date.now() + 600_000, rate: 50, burst: 1000 });
    };
    const limited = await bothWays(ask(), { llmAllowance: 1000 }, { status: 503, atOnce: false }, empty);
    assert.match(limited.body, /TEMPORARILY_UNAVAILABLE/);
    assert.equal(limited.retryAfter, '1');
    assert.deepEqual(
      limited.changes.map((c) => c.replace(/\{.*/, '')),
      ['rate_buckets + '],
      limited.changes.join('\n'),
    );
  });

  it('when the identity was claimed before (completed, pending, uncertain, released, with another body), then both ways answer its replay alike, write nothing, and an empty bucket refuses no replay', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const first =
      (state?: string, emptyBucket = false) =>
      async (u: Made) => {
        const res = await s.call('POST', PATH, { key: u.secret, body: ask(), headers: { 'idempotency-key': IDEM } });
        assert.equal(res.status, 200);
        await res.text();
        if (state) await s.db('idempotency_records').where({ key_id: u.keyId }).update({ state });
        if (emptyBucket)
          await s
            .db('rate_buckets')
            .where({ id: `key:${u.keyId}:text` })
            .update({ tokens: 0, at_ms: Date.now() + 600_000 });
      };
    const user = { llmAllowance: 1000 };
    const replay = await bothWays(ask(), user, { status: 200, atOnce: false }, first());
    assert.deepEqual(replay.changes, []);
    assert.match(replay.body, /chat\.completion/);
    const limited = await bothWays(ask(), user, { status: 200, atOnce: false }, first(undefined, true));
    assert.equal(limited.body, replay.body, 'a replay is never refused by a rate');
    assert.deepEqual(limited.changes, []);
    for (const [state, code, status] of [
      ['pending', 'REQUEST_UNCERTAIN', 409],
      ['uncertain', 'REQUEST_UNCERTAIN', 409],
      ['released', 'REQUEST_FAILED', 409],
    ] as const) {
      const answered = await bothWays(ask(), user, { status, atOnce: false }, first(state));
      assert.match(answered.body, new RegExp(code));
      assert.deepEqual(answered.changes, []);
    }
    const other = await bothWays(ask({ max_tokens: 17 }), user, { status: 409, atOnce: false }, first());
    assert.match(other.body, /IDEMPOTENCY_CONFLICT/);
    assert.deepEqual(other.changes, []);
  });

  it('when the model is unavailable or the hold over maxGems, then the statement is not tried and both ways answer alike', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const model = await bothWays(ask({ model: 'no-such-model' }), { llmAllowance: 1000 }, { status: 422, atOnce: false, tried: false });
    assert.match(model.body, /MODEL_UNAVAILABLE/);
    const ceiling = await bothWays(ask({ max_tokens: 2000, maxGems: 1 }), { llmAllowance: 1000 }, { status: 409, atOnce: false, tried: false });
    assert.match(ceiling.body, /PRICE_CHANGED/);
    for (const o of [model, ceiling]) assert.deepEqual(o.changes, []);
  });

  // ---- The hold alone, right after it is made (before any settlement moves the figures back) -----------------------

  const principalOf = (u: Made) => ({ account: { id: u.accountId }, key: { id: u.keyId } }) as unknown as Principal;

  /** A hold of `amount` for a fresh account made by `user`, at once or as text.ts's transaction makes it: its rows, or its refusal. */
  async function held(amount: number, user: User, atOnce: boolean): Promise<{ changes: string[]; refused?: string; split?: string }> {
    const u = await s.user(user);
    const ref = newId('chatcmpl');
    const reservationId = newId('rsv');
    const identity = { keyId: u.keyId, accountId: u.accountId, idemKey: newId('idem'), operation: 'createChatCompletion', fingerprint: 'f' };
    const ids = { account: u.accountId, key: u.keyId, reservation: reservationId, completion: ref, idem: identity.idemKey };
    const outcome = { state: 'pending' as const, ref, reservationId };
    const hold: spend.Hold = { purpose: 'llm', kind: 'text', amount, ref, id: reservationId };
    let refused: string | undefined;
    let split: string | undefined;
    const changed = await changes(async () => {
      if (atOnce) {
        const made = await spend.claimedAndHeldAtOnce(s.db, systemClock, identity, outcome, hold, tokensAtOnce(systemClock, LIMITS, principalOf(u)));
        if (made) split = `${made.hold_allowance} ${made.hold_paid}`;
        else refused = 'refused';
        return;
      }
      try {
        const made = await spend.inSubmission(s.db, systemClock, identity, async ({ trx, claim, hold: holdIt }) => {
          await admitAtClaim(trx, systemClock, LIMITS, principalOf(u));
          await claim(outcome);
          return holdIt(hold);
        });
        assert.ok(made.created);
        split = `${made.value.hold_allowance} ${made.value.hold_paid}`;
      } catch (error) {
        refused = (error as { code?: string }).code ?? String(error);
      }
    });
    return { changes: changed.map((c) => named(ids, c)).sort(), refused, split };
  }

  it('when a hold is made at once or in the transaction, then right after it both write the same rows and the same split, or refuse and write nothing', async (t) => {
    if (!isSqlite(s.db)) return t.skip('SQLite only');
    const shapes: Array<[number, User, string | undefined]> = [
      [3, { llmAllowance: 1000 }, '3 0'],
      [3, { llmAllowance: 0, paidConsent: true }, '0 3'],
      [3, { llmAllowance: 1, paidConsent: true }, '1 2'],
      [3, { llmAllowance: 3, gems: 0 }, '3 0'],
      [3, { llmAllowance: 1000, cap: 3 }, '3 0'],
      [3, { llmAllowance: 2, paidConsent: true, gems: 1, cap: 10 }, '2 1'],
      [3, { llmAllowance: 2, paidConsent: true, gems: 0 }, undefined],
      [3, { llmAllowance: 2 }, undefined],
      [3, { llmAllowance: 1000, cap: 2 }, undefined],
      [3, { llmAllowance: 1000, cap: 0 }, undefined],
    ];
    for (const [amount, user, split] of shapes) {
      const fast = await held(amount, user, true);
      const slow = await held(amount, user, false);
      const shape = JSON.stringify(user);
      assert.equal(fast.split, split, shape);
      assert.equal(slow.split, split, shape);
      assert.deepEqual(fast.changes, slow.changes, shape);
      if (split) {
        for (const table of ['rate_buckets', 'idempotency_records', 'reservations', 'ledger_entries', 'account_balances', 'key_balances']) {
          assert.ok(new Set(fast.changes.map((c) => c.split(' ')[0])).has(table), `${table} written (${shape}): ${fast.changes.join('\n')}`);
        }
      } else {
        assert.equal(fast.refused, 'refused', shape);
        assert.match(slow.refused ?? '', /LLM_QUOTA_EXHAUSTED|API_KEY_LIMIT/, shape);
        assert.deepEqual(fast.changes, [], `nothing written at once: ${shape}`);
      }
    }
  });
});
