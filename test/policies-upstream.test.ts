/**
 * The OpenAI-compatible moderation adapter (MODERATION_URL) deciding against a
 * local server speaking `POST /v1/moderations`: flagged categories map to the
 * policy file's categories and the account's content preference; an upstream
 * that fails leaves the identity unclaimed and nothing reserved.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { listRecords } from '../server/domain/policy/moderation.ts';
import { systemClock } from '../server/domain/clock.ts';
import { fakeModeration, listenModeration, type SeenModeration } from './helpers/fake-moderation.ts';

describe('moderation through an OpenAI-compatible endpoint', () => {
  const seen: SeenModeration[] = [];
  const upstream = fakeModeration(seen);
  let s: TestServer;
  let counter = 0;
  const post = (key: string, messages: Array<{ role: string; content: string }>) =>
    s.call('POST', '/api/generate/text/v1/chat/completions', {
      key,
      body: { model: 'gemforge-text-1', messages, max_tokens: 16 },
      headers: { 'idempotency-key': `up-${++counter}` },
    });

  before(async () => {
    const url = await listenModeration(upstream);
    s = await startTestServer({ env: { MODERATION_URL: url, MODERATION_API_KEY: 'sk-moderation', MODERATION_MODEL: 'omni-test' } });
  });
  after(async () => {
    await s.close();
    upstream.close();
  });

  it('when the endpoint flags a message, then 422 CONTENT_REJECTED with the mapped category, nothing reserved, and the request was OpenAI-shaped', async () => {
    const u = await s.user({ gems: 100, llmAllowance: 100 });
    seen.length = 0;
    const res = await post(u.secret, [
      { role: 'user', content: 'hello' },
      { role: 'user', content: 'something forbidden' },
    ]);
    const e = await errorOf(res);
    assert.deepEqual([e.status, e.code], [422, 'CONTENT_REJECTED'], e.message);
    assert.match(e.message, /messages\[1\]\.content \(violence\)/);
    assert.deepEqual(seen, [
      { url: '/v1/moderations', authorization: 'Bearer sk-moderation', body: { model: 'omni-test', input: ['hello', 'something forbidden'] } },
    ]);
    const [record] = await listRecords(s.db, { accountId: u.accountId });
    assert.deepEqual([record?.provider, record?.categories], ['openai-compatible', ['violence']]);
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.deepEqual([summary.outstandingReservations.count, summary.llmAllowanceUsed, summary.balance], [0, 0, 100]);
  });

  it('when the endpoint flags nothing, then the request is served unchanged', async () => {
    const u = await s.user({ gems: 100, llmAllowance: 100 });
    const res = await post(u.secret, [{ role: 'user', content: 'Say hello.' }]);
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { object: string }).object, 'chat.completion');
  });

  it('when a flagged category is strict in the policy file, then only strict accounts are refused', async () => {
    const standard = await s.user({ gems: 100, llmAllowance: 100 });
    const strict = await s.user({ gems: 100, llmAllowance: 100 });
    await accounts.updateAccount(s.db, systemClock, strict.accountId, { contentPreference: 'strict' });
    assert.equal((await post(standard.secret, [{ role: 'user', content: 'a spicy story' }])).status, 200);
    const e = await errorOf(await post(strict.secret, [{ role: 'user', content: 'a spicy story' }]));
    assert.deepEqual([e.code, /\(sexual\)/.test(e.message)], ['CONTENT_REJECTED', true]);
  });

  it('when the endpoint fails or answers nonsense, then 503 or 502 with nothing reserved, and the identity stays free for a replay', async () => {
    const u = await s.user({ gems: 100, llmAllowance: 100 });
    const failing = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi [[fail]]' }], max_tokens: 16 };
    const headers = { 'idempotency-key': 'upstream-down' };
    const down = await errorOf(await s.call('POST', '/api/generate/text/v1/chat/completions', { key: u.secret, body: failing, headers }));
    assert.deepEqual([down.status, down.code], [503, 'PROVIDER_UNAVAILABLE']);
    const junk = await errorOf(await post(u.secret, [{ role: 'user', content: 'hi [[junk]]' }]));
    assert.deepEqual([junk.status, junk.code], [502, 'PROVIDER_ERROR']);
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.equal(summary.outstandingReservations.count, 0);
    // Nothing claimed the identity: the same key then serves the request once moderation answers.
    const ok = await s.call('POST', '/api/generate/text/v1/chat/completions', {
      key: u.secret,
      body: { ...failing, messages: [{ role: 'user', content: 'hi' }] },
      headers,
    });
    assert.equal(ok.status, 200, await ok.clone().text());
  });
});
