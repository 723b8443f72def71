/**
 * Text generation at the real server: validation, model checks,
 * metering, replays, concurrency, disconnects, scenario triggers and SSE framing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { expectError, startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { readStream, sseEvents } from './helpers/sse.ts';
import { until } from './helpers/poll.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';
import { chatPromptTokens } from '../server/tokens.ts';
import type { ReservationRow } from '../server/storage/ledger.ts';

const PATH = '/api/generate/text/v1/chat/completions';
const MODEL = 'gemforge-text-1';
let counter = 0;
const newKey = (tag = 'k') => `text-${tag}-${process.pid}-${++counter}`;

interface Completion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Array<{ index: number; message: { role: string; content: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

function post(s: TestServer, key: string, idemKey: string | undefined, body: unknown): Promise<Response> {
  return s.call('POST', PATH, { key, body, headers: idemKey ? { 'idempotency-key': idemKey } : {} });
}

const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content }], ...extra });

async function reservationOf(s: TestServer, completionId: string): Promise<ReservationRow> {
  const row = await s.db('reservations').where({ ref: completionId }).first();
  assert.ok(row, `a reservation for ${completionId}`);
  return row as ReservationRow;
}

async function reservationsOf(s: TestServer, accountId: string): Promise<ReservationRow[]> {
  return (await s.db('reservations').where({ account_id: accountId })) as ReservationRow[];
}

/** ceil((prompt × 1 + completion × 2) / 1000) at gemforge-text-1's rates. */
const chargeFor = (u: Completion['usage']) => Math.ceil((u.prompt_tokens * 1 + u.completion_tokens * 2) / 1000);

describe('text generation', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '0' } });
  });
  after(() => s.close());

  describe('completions', () => {
    it('when a user asks without streaming, then a chat.completion restates the message and usage is real token counts', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const messages = [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Name three uses for basalt.' },
      ];
      const res = await post(s, u.secret, newKey(), { model: MODEL, messages, temperature: 0.3, top_p: 0.9 });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      const c = (await res.json()) as Completion;
      assert.deepEqual(Object.keys(c).sort(), ['choices', 'created', 'id', 'model', 'object', 'usage']);
      assert.equal(c.object, 'chat.completion');
      assert.equal(c.model, MODEL);
      assert.match(c.id, /^chatcmpl_/);
      assert.ok(Math.abs(c.created - Date.now() / 1000) < 60);
      assert.equal(c.choices.length, 1);
      assert.equal(c.choices[0].message.role, 'assistant');
      assert.equal(c.choices[0].finish_reason, 'stop');
      assert.match(c.choices[0].message.content, /not a language model/);
      assert.match(c.choices[0].message.content, /Name three uses for basalt\./);
      assert.match(c.choices[0].message.content, /NAME THREE USES FOR BASALT\./);
      assert.match(c.choices[0].message.content, /You are terse\./);
      assert.equal(c.usage.prompt_tokens, chatPromptTokens(messages));
      assert.ok(c.usage.completion_tokens > 10);
      assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
    });

    it('when the same conversation is asked twice with new keys, then the answer is the same (deterministic)', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const a = (await (await post(s, u.secret, newKey(), ask('Deterministic?'))).json()) as Completion;
      const b = (await (await post(s, u.secret, newKey(), ask('Deterministic?', { temperature: 2 }))).json()) as Completion;
      assert.equal(a.choices[0].message.content, b.choices[0].message.content);
      assert.notEqual(a.id, b.id);
    });

    it('when max_tokens is smaller than the answer, then it is cut at exactly that many tokens with finish_reason length', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const c = (await (await post(s, u.secret, newKey(), ask('Tell me a long story about the sea.', { max_tokens: 7 }))).json()) as Completion;
      assert.equal(c.choices[0].finish_reason, 'length');
      assert.equal(c.usage.completion_tokens, 7);
      const streamed = await readStream(await post(s, u.secret, newKey(), ask('Tell me a long story about the sea.', { max_tokens: 7, stream: true })));
      assert.equal(streamed.finishReason, 'length');
      assert.equal(streamed.usage?.completion_tokens, 7);
      assert.equal(streamed.content, c.choices[0].message.content);
    });

    it('when response_format is json_object, then the content is valid JSON (streamed too)', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const body = ask('Return {"colour": <a colour>} as JSON.', { response_format: { type: 'json_object' } });
      const c = (await (await post(s, u.secret, newKey(), body)).json()) as Completion;
      const parsed = JSON.parse(c.choices[0].message.content) as Record<string, unknown>;
      assert.equal(parsed.restated, 'Return {"colour": <a colour>} as JSON.');
      const streamed = await readStream(await post(s, u.secret, newKey(), { ...body, stream: true }));
      assert.deepEqual(JSON.parse(streamed.content), parsed);
    });

    it('when streaming, then SSE frames carry chunks token by token, the final chunk usage, then [DONE] (byte-for-byte)', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const body = ask('Stream me, with ünïcödé and emoji 🚀🌋 please.');
      const expected = (await (await post(s, u.secret, newKey(), body)).json()) as Completion;
      const res = await post(s, u.secret, newKey(), { ...body, stream: true });
      const r = await readStream(res);
      assert.equal(r.done, true);
      assert.equal(r.error, undefined);
      assert.ok(r.chunks.length > 10, 'many chunks');
      assert.equal(r.chunks[0].choices[0].delta.role, 'assistant');
      for (const c of r.chunks.slice(1)) assert.equal(c.choices[0].delta.role, undefined);
      const ids = new Set(r.chunks.map((c) => c.id));
      assert.equal(ids.size, 1);
      for (const c of r.chunks.slice(0, -1)) {
        assert.equal(c.choices[0].finish_reason, null);
        assert.equal(c.usage, undefined);
      }
      const last = r.chunks.at(-1)!;
      assert.equal(last.choices[0].finish_reason, 'stop');
      assert.deepEqual(last.usage, expected.usage);
      assert.equal(r.content, expected.choices[0].message.content);
      assert.equal(r.data.at(-1), '[DONE]');
      assert.ok(!r.content.includes('\uFFFD'), 'no broken characters across deltas');
    });
  });

  describe('validation', () => {
    let key: string;
    let accountId: string;
    before(async () => {
      const u = await s.user({ llmAllowance: 1000 });
      key = u.secret;
      accountId = u.accountId;
    });

    const invalid: Array<[string, unknown]> = [
      ['a role outside system/user/assistant', { model: MODEL, messages: [{ role: 'tool', content: 'x' }] }],
      ['array-valued content', { model: MODEL, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] }],
      ['tools', { ...ask('hi'), tools: [{ type: 'function', function: { name: 'f' } }] }],
      ['tool_choice', { ...ask('hi'), tool_choice: 'auto' }],
      ['a provider-routing override', { ...ask('hi'), provider: { order: ['x'] } }],
      ['an unknown field', { ...ask('hi'), frequency_penalty: 1 }],
      ['an unknown message field', { model: MODEL, messages: [{ role: 'user', content: 'x', name: 'bob' }] }],
      ['no messages', { model: MODEL, messages: [] }],
      ['61 messages', { model: MODEL, messages: Array.from({ length: 61 }, () => ({ role: 'user', content: 'x' })) }],
      ['max_tokens 0', ask('hi', { max_tokens: 0 })],
      ['max_tokens 8193', ask('hi', { max_tokens: 8193 })],
      ['a fractional max_tokens', ask('hi', { max_tokens: 1.5 })],
      ['temperature 2.1', ask('hi', { temperature: 2.1 })],
      ['top_p 1.1', ask('hi', { top_p: 1.1 })],
      ['response_format json_schema', ask('hi', { response_format: { type: 'json_schema' } })],
      ['maxGems above 1,000,000', ask('hi', { maxGems: 1_000_001 })],
      ['a message over 30,000 characters', ask('x'.repeat(30_001))],
      ['no model', { messages: [{ role: 'user', content: 'x' }] }],
      ['a model ID over 150 characters', { ...ask('hi'), model: 'm'.repeat(151) }],
      ['stream as a string', ask('hi', { stream: 'true' })],
    ];
    for (const [what, body] of invalid) {
      it(`when the body has ${what}, then 422 INVALID_REQUEST and nothing is reserved`, async () => {
        await expectError(await post(s, key, newKey(), body), 422, 'INVALID_REQUEST');
      });
    }

    it('when 60 messages are sent, then it is accepted', async () => {
      const messages = Array.from({ length: 60 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }));
      const res = await post(s, key, newKey(), { model: MODEL, messages });
      assert.equal(res.status, 200);
      assert.match(((await res.json()) as Completion).choices[0].message.content, /59 earlier messages/);
    });

    it('when max_tokens is 1 or 8192, then it is accepted', async () => {
      for (const max of [1, 8192]) assert.equal((await post(s, key, newKey(), ask('edge', { max_tokens: max }))).status, 200);
    });

    it('when the Idempotency-Key is missing or malformed, then 422 INVALID_REQUEST', async () => {
      await expectError(await post(s, key, undefined, ask('hi')), 422, 'INVALID_REQUEST');
      await expectError(await post(s, key, 'bad key!', ask('hi')), 422, 'INVALID_REQUEST');
      await expectError(await post(s, key, 'k'.repeat(129), ask('hi')), 422, 'INVALID_REQUEST');
    });

    it('when the serialized conversation is over 128,000 bytes but the body under 160,000, then 422 INVALID_REQUEST naming the limit', async () => {
      const messages = Array.from({ length: 5 }, () => ({ role: 'user', content: 'y'.repeat(26_000) }));
      const body = { model: MODEL, messages };
      assert.ok(JSON.stringify(body).length < 160_000 && JSON.stringify(messages).length > 128_000);
      const message = await expectError(await post(s, key, newKey(), body), 422, 'INVALID_REQUEST');
      assert.match(message, /128000/);
    });

    it('when the conversation is just under 128,000 bytes, then it is accepted', async () => {
      const content = 'z'.repeat(25_500);
      const messages = Array.from({ length: 5 }, () => ({ role: 'user', content }));
      assert.ok(JSON.stringify(messages).length <= 128_000);
      assert.equal((await post(s, key, newKey(), { model: MODEL, messages, max_tokens: 16 })).status, 200);
    });

    it('when the request body is over 160,000 bytes, then 413', async () => {
      const messages = Array.from({ length: 6 }, () => ({ role: 'user', content: 'q'.repeat(28_000) }));
      await expectError(await post(s, key, newKey(), { model: MODEL, messages }), 413, undefined);
    });

    it('when the model is unknown or not a text model, then 422 MODEL_UNAVAILABLE', async () => {
      await expectError(await post(s, key, newKey(), { ...ask('hi'), model: 'no-such-model' }), 422, 'MODEL_UNAVAILABLE');
      await expectError(await post(s, key, newKey(), { ...ask('hi'), model: 'gemforge-image-1' }), 422, 'MODEL_UNAVAILABLE');
    });

    it('when a key lacks the generate scope, then 403 INSUFFICIENT_SCOPE', async () => {
      const read = await s.key(accountId, { scopes: ['read'] });
      await expectError(await post(s, read.secret, newKey(), ask('hi')), 403, 'INSUFFICIENT_SCOPE');
    });

    it('after all the rejected requests, then this account holds no reservation beyond the accepted ones', async () => {
      const rows = await reservationsOf(s, accountId);
      assert.ok(rows.every((r) => r.state !== 'held'));
      assert.equal((await s.db('idempotency_records').where({ account_id: accountId, state: 'pending' })).length, 0);
    });
  });

  describe('metering', () => {
    it('when a completion settles, then the charge is the measured cost, at most the conservative reservation', async () => {
      const u = await s.user({ llmAllowance: 100, gems: 0 });
      const res = await post(s, u.secret, newKey(), ask('Meter me.'));
      const c = (await res.json()) as Completion;
      const r = await reservationOf(s, c.id);
      // reservation: ceil((prompt × 1 + 4096 × 2) / 1000) with the exact local prompt count
      assert.equal(r.hold_allowance + r.hold_paid, Math.ceil((c.usage.prompt_tokens + 4096 * 2) / 1000));
      assert.equal(r.purpose, 'llm');
      assert.equal(r.state, 'settled');
      assert.equal(r.charged, chargeFor(c.usage));
      assert.ok(r.charged <= r.hold_allowance + r.hold_paid);
      const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]);
      assert.equal(summary.llmAllowanceUsed, r.charged);
      assert.equal(summary.outstandingReservations.count, 0);
      assert.equal(summary.keySpendThisMonth[u.keyId], r.charged);
    });

    it('when the allowance is short and paid Gems are consented, then the allowance is used first, then paid Gems', async () => {
      const u = await s.user({ llmAllowance: 3, paidConsent: true, gems: 50 });
      const c = (await (await post(s, u.secret, newKey(), ask('Split me.'))).json()) as Completion;
      const r = await reservationOf(s, c.id);
      assert.equal(r.hold_allowance, 3);
      assert.equal(r.hold_paid, 6);
      assert.equal(r.charged, 1);
      const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]);
      assert.equal(summary.llmAllowanceUsed, 1);
      assert.equal(summary.balance, 50);
    });

    it('when the allowance is used up and paid Gems are consented, then paid Gems pay', async () => {
      const u = await s.user({ llmAllowance: 0, paidConsent: true, gems: 20 });
      const c = (await (await post(s, u.secret, newKey(), ask('Pay me.'))).json()) as Completion;
      const r = await reservationOf(s, c.id);
      assert.equal(r.hold_paid, 9);
      assert.equal(await ledger.balanceOf(s.db, u.accountId), 20 - r.charged);
    });

    it('when the allowance cannot cover the reservation and there is no consent, then 402 LLM_QUOTA_EXHAUSTED', async () => {
      const u = await s.user({ llmAllowance: 2, paidConsent: false, gems: 1000 });
      await expectError(await post(s, u.secret, newKey(), ask('No.')), 402, 'LLM_QUOTA_EXHAUSTED');
      // A smaller max_tokens makes the conservative maximum fit the allowance.
      assert.equal((await post(s, u.secret, newKey(), ask('Yes.', { max_tokens: 500 }))).status, 200);
    });

    it('when consented paid Gems cannot cover the rest, then 402 LLM_QUOTA_EXHAUSTED and nothing is held', async () => {
      const u = await s.user({ llmAllowance: 1, paidConsent: true, gems: 3 });
      await expectError(await post(s, u.secret, newKey(), ask('No.')), 402, 'LLM_QUOTA_EXHAUSTED');
      assert.equal((await reservationsOf(s, u.accountId)).length, 0);
    });

    it('when the conservative maximum exceeds maxGems, then 409 PRICE_CHANGED (not retryable) and nothing is reserved', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const res = await post(s, u.secret, k, ask('Too dear.', { maxGems: 8 }));
      assert.equal(res.headers.get('x-should-retry'), 'false');
      assert.match(await expectError(res, 409, 'PRICE_CHANGED'), /9 Gems/);
      assert.equal((await reservationsOf(s, u.accountId)).length, 0);
      // Nothing was claimed: the same identity with the same body is admissible once affordable.
      const ok = await post(s, u.secret, newKey(), ask('Too dear.', { maxGems: 9 }));
      assert.equal(ok.status, 200);
    });

    it("when the key's monthly cap cannot cover the reservation, then 402 API_KEY_LIMIT", async () => {
      const u = await s.user({ llmAllowance: 100, cap: 5 });
      await expectError(await post(s, u.secret, newKey(), ask('Capped.')), 402, 'API_KEY_LIMIT');
      assert.equal((await post(s, u.secret, newKey(), ask('Capped.', { max_tokens: 1000 }))).status, 200);
      const zero = await s.user({ llmAllowance: 100, cap: 0 });
      await expectError(await post(s, zero.secret, newKey(), ask('Zero.', { max_tokens: 1 })), 402, 'API_KEY_LIMIT');
    });
  });

  describe('replays', () => {
    it('when a completed non-streaming identity is replayed, then the saved JSON returns with no new inference or charge', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const first = (await (await post(s, u.secret, k, ask('Replay me.'))).json()) as Completion;
      const before = await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]);
      const again = await post(s, u.secret, k, ask('Replay me.', { stream: false }));
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), first);
      assert.deepEqual(await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]), before);
      assert.equal((await reservationsOf(s, u.accountId)).length, 1);
    });

    it('when a completed streaming identity is replayed, then one chunk with the whole answer, the usage chunk and [DONE]', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const body = ask('Replay my stream.', { stream: true });
      const first = await readStream(await post(s, u.secret, k, body));
      const before = await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]);
      const again = await readStream(await post(s, u.secret, k, body));
      assert.equal(again.done, true);
      assert.equal(again.chunks.length, 2);
      assert.equal(again.chunks[0].choices[0].delta.role, 'assistant');
      assert.equal(again.chunks[0].choices[0].delta.content, first.content);
      assert.equal(again.content, first.content);
      assert.deepEqual(again.usage, first.usage);
      assert.equal(again.finishReason, first.finishReason);
      assert.equal(again.chunks[0].id, first.chunks[0].id);
      assert.deepEqual(await ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]), before);
    });

    it('when the same key comes with the stream flag flipped or another body, then 409 IDEMPOTENCY_CONFLICT (not retryable)', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      assert.equal((await post(s, u.secret, k, ask('Conflict.'))).status, 200);
      const flipped = await post(s, u.secret, k, ask('Conflict.', { stream: true }));
      assert.equal(flipped.headers.get('x-should-retry'), 'false');
      await expectError(flipped, 409, 'IDEMPOTENCY_CONFLICT');
      await expectError(await post(s, u.secret, k, ask('Conflict!')), 409, 'IDEMPOTENCY_CONFLICT');
      await expectError(await post(s, u.secret, k, ask('Conflict.', { max_tokens: 10 })), 409, 'IDEMPOTENCY_CONFLICT');
      // max_tokens 4096 is the default: spelling it out is the same request.
      assert.equal((await post(s, u.secret, k, ask('Conflict.', { max_tokens: 4096, stream: false }))).status, 200);
    });

    it('when the key that made a completion is revoked, then its replay is refused with 401', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      assert.equal((await post(s, u.secret, k, ask('Revoke.'))).status, 200);
      await accounts.revokeKey(s.db, systemClock, u.keyId);
      await expectError(await post(s, u.secret, k, ask('Revoke.')), 401, 'INVALID_API_KEY');
    });

    it('when 120 identical requests race on one identity, then exactly one reservation; the rest replay or get REQUEST_UNCERTAIN', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey('race');
      const body = ask('Race!');
      const responses = await Promise.all(Array.from({ length: 120 }, () => post(s, u.secret, k, body)));
      const contents = new Set<string>();
      let uncertain = 0;
      let ok = 0;
      for (const res of responses) {
        if (res.status === 200) {
          ok++;
          contents.add(JSON.stringify(await res.json()));
        } else {
          await expectError(res, 409, 'REQUEST_UNCERTAIN');
          uncertain++;
        }
      }
      assert.equal(ok + uncertain, 120);
      assert.ok(ok >= 1);
      assert.equal(contents.size, 1, 'every 200 is the same completion');
      const rows = await reservationsOf(s, u.accountId);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].state, 'settled');
    });
  });

  describe('scenario triggers', () => {
    it('when the last user message has [[scenario:stream-error]] and streams, then chunks, a PROVIDER_ERROR frame, no [DONE]; usage so far is billed; replays return the same final error', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const body = ask('Fail me part-way [[scenario:stream-error]]', { stream: true });
      const r = await readStream(await post(s, u.secret, k, body));
      assert.equal(r.done, false);
      assert.equal(r.error?.code, 'PROVIDER_ERROR');
      assert.equal(r.chunks.length, 4);
      assert.ok(r.content.length > 0);
      assert.ok(!r.content.includes('[[scenario'), 'the marker never reaches the provider');
      const row = await reservationOf(s, r.chunks[0].id);
      assert.equal(row.state, 'settled');
      assert.equal(row.charged, 1);
      const replay = await post(s, u.secret, k, body);
      assert.equal(replay.headers.get('x-should-retry'), 'false');
      assert.match(await expectError(replay, 502, 'PROVIDER_ERROR'), /final/);
      await expectError(await post(s, u.secret, k, { ...body, stream: false }), 409, 'IDEMPOTENCY_CONFLICT');
      assert.equal((await reservationOf(s, r.chunks[0].id)).charged, 1, 'replays charge nothing');
    });

    it('when [[scenario:stream-error]] comes without streaming, then 502 PROVIDER_ERROR, final: replays return it with x-should-retry false', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const first = await post(s, u.secret, k, ask('[[scenario:stream-error:2]] fail'));
      assert.equal(first.headers.get('x-should-retry'), 'false');
      const original = await expectError(first, 502, 'PROVIDER_ERROR');
      const replay = await post(s, u.secret, k, ask('[[scenario:stream-error:2]] fail'));
      assert.equal(replay.headers.get('x-should-retry'), 'false');
      assert.deepEqual(await expectError(replay, 502, 'PROVIDER_ERROR'), original);
      const rows = await reservationsOf(s, u.accountId);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].state, 'settled');
    });

    it('when the last user message has [[scenario:uncertain]], then the outcome stays uncertain with the reservation held, for every replay', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      const streamed = await readStream(await post(s, u.secret, k, ask('Lose me [[scenario:uncertain]]', { stream: true })));
      assert.equal(streamed.done, false);
      assert.equal(streamed.error?.code, 'REQUEST_UNCERTAIN');
      const k2 = newKey();
      await expectError(await post(s, u.secret, k2, ask('Lose me [[scenario:uncertain]]')), 409, 'REQUEST_UNCERTAIN');
      for (let i = 0; i < 3; i++) {
        await expectError(await post(s, u.secret, k, ask('Lose me [[scenario:uncertain]]', { stream: true })), 409, 'REQUEST_UNCERTAIN');
        await expectError(await post(s, u.secret, k2, ask('Lose me [[scenario:uncertain]]')), 409, 'REQUEST_UNCERTAIN');
      }
      const rows = await reservationsOf(s, u.accountId);
      assert.equal(rows.length, 2);
      assert.ok(rows.every((r) => r.state === 'held'));
      const records = await s.db('idempotency_records').where({ account_id: u.accountId });
      assert.deepEqual(
        records.map((r: { state: string }) => r.state),
        ['uncertain', 'uncertain'],
      );
    });

    it('when the last user message has [[scenario:provider-unavailable]], then 503 PROVIDER_UNAVAILABLE before anything is claimed', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const k = newKey();
      for (const stream of [false, true]) {
        await expectError(await post(s, u.secret, `${k}-${stream}`, ask('[[scenario:provider-unavailable]]', { stream })), 503, 'PROVIDER_UNAVAILABLE');
      }
      assert.equal((await reservationsOf(s, u.accountId)).length, 0);
      assert.equal((await s.db('idempotency_records').where({ account_id: u.accountId })).length, 0);
    });

    it('when a marker is in an earlier message, not the last user message, then it is ordinary text', async () => {
      const u = await s.user({ llmAllowance: 100 });
      const messages = [
        { role: 'user', content: '[[scenario:provider-unavailable]]' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'fine' },
      ];
      assert.equal((await post(s, u.secret, newKey(), { model: MODEL, messages })).status, 200);
    });
  });

  describe('disconnects', () => {
    let slow: TestServer;
    before(async () => {
      slow = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '15' } });
    });
    after(() => slow.close());

    it('when the client disconnects mid-stream, then the generation still completes, settles and its result replays', async () => {
      const u = await slow.user({ llmAllowance: 100 });
      const k = newKey();
      const body = ask('Keep going after I leave, please, for a good while.', { stream: true });
      const controller = new AbortController();
      const res = await fetch(new URL(PATH, slow.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${u.secret}`, 'content-type': 'application/json', 'idempotency-key': k },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      const reader = sseEvents(res);
      const first = JSON.parse((await reader.next()).value as string) as { id: string };
      // Leave after the first chunk: the socket closes.
      controller.abort();
      await reader.return(undefined).catch(() => undefined);
      const started = Date.now();
      const row = await until('settlement', async () => {
        const r = await reservationOf(slow, first.id);
        return r.state === 'held' ? undefined : r;
      });
      assert.ok(Date.now() - started > 100, 'the generation went on after the client left');
      assert.equal(row.state, 'settled');
      assert.ok(row.charged >= 1);
      const replay = await readStream(await post(slow, u.secret, k, body));
      assert.equal(replay.done, true);
      assert.match(replay.content, /Keep going after I leave/);
      assert.equal(replay.chunks[0].id, first.id);
      assert.equal(row.charged, chargeFor(replay.usage!));
    });

    it('when a non-streaming client disconnects, then the generation still settles and is retained', async () => {
      const u = await slow.user({ llmAllowance: 100 });
      const k = newKey();
      const controller = new AbortController();
      const pending = fetch(new URL(PATH, slow.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${u.secret}`, 'content-type': 'application/json', 'idempotency-key': k },
        body: JSON.stringify(ask('Abandon me.')),
        signal: controller.signal,
      }).catch((e: unknown) => e);
      // Disconnect once the completion was admitted (its reservation is held) and is being generated.
      await until('the completion admitted', async () => (await reservationsOf(slow, u.accountId)).length > 0, 10_000, 10);
      controller.abort();
      await pending;
      const row = await until('settlement', async () => {
        const rows = await reservationsOf(slow, u.accountId);
        return rows[0]?.state === 'settled' ? rows[0] : undefined;
      });
      const replay = await post(slow, u.secret, k, ask('Abandon me.'));
      assert.equal(replay.status, 200);
      assert.equal(((await replay.json()) as Completion).id, row.ref);
    });
  });
});

describe('text generation with scenarios disabled and an unavailable text model', () => {
  let s: TestServer;
  let catalogDir: string;
  before(async () => {
    catalogDir = tempDataDir();
    const doc = YAML.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../server/catalog/models.yaml'), 'utf8'));
    doc.models.push({
      id: 'gemforge-text-retired',
      name: 'Retired text model',
      kind: 'text',
      available: false,
      capabilities: {},
      pricing: { inputPerThousandTokens: 1, outputPerThousandTokens: 1 },
    });
    const file = path.join(catalogDir, 'models.yaml');
    fs.writeFileSync(file, YAML.stringify(doc));
    s = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '0', SCENARIOS_ENABLED: 'false', CATALOG_PATH: file } });
  });
  after(async () => {
    await s.close();
    fs.rmSync(catalogDir, { recursive: true, force: true });
  });

  it('when SCENARIOS_ENABLED=false, then markers are ordinary text', async () => {
    const u = await s.user({ llmAllowance: 100 });
    const res = await post(s, u.secret, newKey(), ask('[[scenario:provider-unavailable]] [[scenario:uncertain]]'));
    assert.equal(res.status, 200);
    assert.match(((await res.json()) as Completion).choices[0].message.content, /\[\[scenario:provider-unavailable\]\]/);
  });

  it('when the text model is listed but not available, then 422 MODEL_UNAVAILABLE', async () => {
    const u = await s.user({ llmAllowance: 100 });
    await expectError(await post(s, u.secret, newKey(), { ...ask('hi'), model: 'gemforge-text-retired' }), 422, 'MODEL_UNAVAILABLE');
  });
});

describe('a text SDK pointed at the Responses API', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s?.close());

  it('when POST /api/generate/text/v1/responses is called (with or without a key), then 404 NOT_FOUND says chat completions is served and how to configure the SDK', async () => {
    const { secret } = await s.user({ gems: 10, llmAllowance: 1000 });
    for (const key of [secret, undefined]) {
      const res = await s.call('POST', '/api/generate/text/v1/responses', { ...(key && { key }), body: { model: MODEL, input: 'hello' } });
      const message = await expectError(res, 404, 'NOT_FOUND');
      assert.match(message, /\/api\/generate\/text\/v1\/chat\/completions/);
      assert.match(message, /provider\.chat\(/);
      assert.doesNotMatch(message, /^No such route\.$/);
    }
    const other = await s.call('POST', '/api/generate/text/v1/completions', { key: secret, body: { model: MODEL, prompt: 'hello' } });
    assert.match(await expectError(other, 404, 'NOT_FOUND'), /chat completions only, at POST \/api\/generate\/text\/v1\/chat\/completions/);
    const elsewhere = await s.call('GET', '/api/generate/nothing-here', { key: secret });
    assert.equal(await expectError(elsewhere, 404, 'NOT_FOUND'), 'No such route.');
  });
});
