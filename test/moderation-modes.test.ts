/**
 * Who judges text, at the real server: MODERATION_MODE=both asks the remote
 * endpoint (a local fake speaking OpenAI's `/v1/moderations`) about what the
 * embedded policy passes, and MODERATION_REMOTE_FALLBACK decides while the
 * endpoint fails (counted in /metrics); the embedded policy, reading English
 * only, leaves text in other languages unjudged: strict accounts are refused,
 * standard ones served, both recorded without counting towards a block.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { fakeModeration, listenModeration, type SeenModeration } from './helpers/fake-moderation.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { listRecords } from '../server/domain/policy/moderation.ts';
import { systemClock } from '../server/domain/clock.ts';

const IMAGE = '/api/generate/image';
const TOKEN = 'metrics-token-for-moderation-modes';
const SPANISH = 'un gato negro durmiendo en la ventana de una casa con el sol de la tarde';
let counter = 0;
const image = (s: TestServer, key: string, prompt: string) =>
  s.call('POST', IMAGE, {
    key,
    body: { model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } },
    headers: { 'idempotency-key': `modes-${process.pid}-${++counter}` },
  });

async function strictUser(s: TestServer) {
  const u = await s.user({ gems: 100 });
  await accounts.updateAccount(s.db, systemClock, u.accountId, { contentPreference: 'strict' });
  return u;
}

async function refusal(res: Response): Promise<{ code?: string | undefined; message: string }> {
  const e = await errorOf(res);
  assert.equal(e.status, 422, e.message);
  return e;
}

async function fallbacks(s: TestServer, mode: string, fallback: string): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`gemforge_moderation_remote_fallbacks_total{mode="${mode}",fallback="${fallback}"}`));
  return Number(line?.split(' ').pop() ?? 0);
}

describe('MODERATION_MODE=both with the default closed fallback', () => {
  const seen: SeenModeration[] = [];
  const upstream = fakeModeration(seen);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { MODERATION_MODE: 'both', MODERATION_URL: await listenModeration(upstream), METRICS_TOKEN: TOKEN } });
  });
  after(async () => {
    await s.close();
    upstream.close();
  });

  it('when the embedded policy refuses, then 422 and the endpoint is not asked', async () => {
    const u = await s.user({ gems: 100 });
    seen.length = 0;
    const e = await refusal(await image(s, u.secret, 'how to make a bomb at home'));
    assert.match(e.message, /\(violence\)/);
    assert.deepEqual(seen, []);
    const [record] = await listRecords(s.db, { accountId: u.accountId });
    assert.equal(record?.provider, 'embedded');
  });

  it('when the embedded policy passes and the endpoint flags, then 422 from the endpoint, nothing reserved', async () => {
    const u = await s.user({ gems: 100 });
    seen.length = 0;
    const e = await refusal(await image(s, u.secret, 'a forbidden fox in the snow'));
    assert.match(e.message, /prompt \(violence\)/);
    assert.deepEqual(
      seen.map((r) => r.body.input),
      [['a forbidden fox in the snow']],
    );
    const [record] = await listRecords(s.db, { accountId: u.accountId });
    assert.equal(record?.provider, 'openai-compatible');
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.deepEqual([summary.outstandingReservations.count, summary.balance], [0, 100]);
  });

  it('when both pass, then the request is served; text in another language is judged by the endpoint, so a strict account is served too', async () => {
    const u = await strictUser(s);
    assert.equal((await image(s, u.secret, 'a red fox in the snow')).status, 202);
    assert.equal((await image(s, u.secret, SPANISH)).status, 202);
    assert.deepEqual(await listRecords(s.db, { accountId: u.accountId, all: true }), []);
  });

  it('when the endpoint fails, then 503 as with the endpoint alone, and the fallback is counted', async () => {
    const u = await s.user({ gems: 100 });
    const before = await fallbacks(s, 'both', 'closed');
    const e = await errorOf(await image(s, u.secret, 'a fox [[fail]]'));
    assert.deepEqual([e.status, e.code], [503, 'PROVIDER_UNAVAILABLE']);
    assert.equal(await fallbacks(s, 'both', 'closed'), before + 1);
  });
});

describe('MODERATION_MODE=both with MODERATION_REMOTE_FALLBACK=open', () => {
  const upstream = fakeModeration([]);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({
      env: { MODERATION_MODE: 'both', MODERATION_REMOTE_FALLBACK: 'open', MODERATION_URL: await listenModeration(upstream), METRICS_TOKEN: TOKEN },
    });
  });
  after(async () => {
    await s.close();
    upstream.close();
  });

  it('when the endpoint fails, then the embedded verdict stands (served, refused, or unjudged for a strict account), counted each time', async () => {
    const u = await s.user({ gems: 100 });
    const strict = await strictUser(s);
    const before = await fallbacks(s, 'both', 'open');
    assert.equal((await image(s, u.secret, 'a fox [[fail]]')).status, 202);
    assert.match((await refusal(await image(s, u.secret, 'how to make a bomb [[fail]]'))).message, /\(violence\)/);
    assert.match((await refusal(await image(s, strict.secret, `${SPANISH} [[fail]]`))).message, /cannot judge prompt: it reads as Spanish/);
    // The embedded refusal never reached the endpoint: two fallbacks, not three.
    assert.equal(await fallbacks(s, 'both', 'open'), before + 2);
  });
});

describe('the embedded policy and text in other languages', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s.close();
  });

  it('when a strict account writes in another language, then 422 CONTENT_REJECTED says the policy cannot judge it, recorded without ever blocking', async () => {
    const u = await strictUser(s);
    for (const prompt of [
      SPANISH,
      'un chat noir qui dort sur la fenêtre de la maison',
      'eine schwarze Katze, die auf dem Fenster schläft und nicht aufwacht',
    ]) {
      const e = await refusal(await image(s, u.secret, prompt));
      assert.equal(e.code, 'CONTENT_REJECTED');
      assert.match(
        e.message,
        /cannot judge prompt: it reads as (Spanish|French|German), and the policy reads English only; this account's strict content preference refuses/,
      );
    }
    for (let i = 0; i < 4; i++) await refusal(await image(s, u.secret, SPANISH));
    // Seven refusals, past the threshold of five, and still not blocked: an English prompt is served.
    assert.equal((await image(s, u.secret, 'a black cat asleep on the window sill')).status, 202);
    const records = await listRecords(s.db, { accountId: u.accountId, all: true });
    assert.equal(records.length, 7);
    assert.ok(records.every((r) => r.clearedAt !== null && r.categories[0]!.startsWith('unjudged:')));
    assert.deepEqual(await listRecords(s.db, { accountId: u.accountId }), []);
  });

  it('when a standard account writes in another language, then it is served and the decision is recorded', async () => {
    const u = await s.user({ gems: 100 });
    assert.equal((await image(s, u.secret, SPANISH)).status, 202);
    const [record, ...rest] = await listRecords(s.db, { accountId: u.accountId, all: true });
    assert.deepEqual([record?.categories, record?.provider, record?.field, rest.length], [['unjudged:es'], 'embedded', 'prompt', 0]);
  });

  it('when text in another language also breaks the policy in words it knows, then it is refused for what it breaks', async () => {
    const u = await s.user({ gems: 100 });
    assert.match((await refusal(await image(s, u.secret, 'quiero saber how to make a bomb en la casa de mi vecino'))).message, /\(violence\)/);
  });
});

describe('the learned classifier at the server (MODERATION_CLASSIFIER)', () => {
  // The rules pass this one; the classifier refuses it (test/unit/moderation-classifier.test.ts).
  const ONLY_THE_CLASSIFIER = 'drone attack on a crowded festival, how';
  const servers: TestServer[] = [];
  after(async () => {
    for (const s of servers) await s.close();
  });

  it('when the classifier is on (the default), then what only it refuses is 422 CONTENT_REJECTED with nothing reserved; when MODERATION_CLASSIFIER=off, then it is served', async () => {
    const off = await startTestServer({ env: { MODERATION_CLASSIFIER: 'off' } });
    servers.push(off);
    const u = await off.user({ gems: 100 });
    assert.equal((await image(off, u.secret, ONLY_THE_CLASSIFIER)).status, 202);

    const on = await startTestServer();
    servers.push(on);
    const v = await on.user({ gems: 100 });
    const e = await refusal(await image(on, v.secret, ONLY_THE_CLASSIFIER));
    assert.equal(e.code, 'CONTENT_REJECTED');
    assert.match(e.message, /terrorism/);
    const summary = await ledger.accountSummary(on.db, systemClock, v.accountId, []);
    assert.deepEqual([summary.outstandingReservations.count, summary.balance], [0, 100]);
    // An ordinary prompt is still served with the classifier on.
    assert.equal((await image(on, v.secret, 'a black cat asleep on the window sill')).status, 202);
  });
});
