/**
 * The foundation at the real server: authentication, scopes, account states and
 * the Error envelope for every failure class (issue: Foundation).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import * as accounts from '../server/domain/accounts.ts';
import { systemClock } from '../server/domain/clock.ts';
import { OffsetClock } from './helpers/db.ts';

const MODELS = '/api/generate/models';

function assertEnvelope(body: unknown, code: string | undefined): void {
  assert.equal(typeof body, 'object');
  const b = body as Record<string, unknown>;
  assert.deepEqual(Object.keys(b), ['error'], 'only `error` at the top level');
  const e = b.error as Record<string, unknown>;
  assert.equal(typeof e.message, 'string');
  assert.ok((e.message as string).length > 0);
  for (const k of Object.keys(e)) assert.ok(k === 'message' || k === 'code', `unexpected field ${k}`);
  if (code) assert.equal(e.code, code);
}

async function expectError(res: Response, status: number, code?: string): Promise<void> {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  assert.ok(res.headers.get('x-request-id'), 'every response carries x-request-id');
  assertEnvelope(await res.json(), code);
}

describe('foundation', () => {
  let s: TestServer;
  let readKey: string;
  let generateKey: string;
  let accountId: string;

  const clock = new OffsetClock();

  before(async () => {
    s = await startTestServer({ clock });
    accountId = await s.account({ gems: 10 });
    readKey = (await s.key(accountId, { scopes: ['read'] })).secret;
    generateKey = (await s.key(accountId, { scopes: ['generate'] })).secret;
  });
  after(() => s.close());

  it('when a read key lists models, then it gets the catalog and the accounting period', async () => {
    const res = await s.call('GET', MODELS, { key: readKey });
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('x-request-id'));
    const body = (await res.json()) as { models: Array<Record<string, unknown>>; accountingPeriod: string };
    assert.equal(body.accountingPeriod, 'UTC calendar month');
    const kinds = body.models.map((m) => m.kind);
    assert.ok(kinds.includes('image') && kinds.includes('text'));
    const videos = body.models.filter((m) => m.kind === 'video');
    assert.ok(videos.length >= 2, 'at least two video models');
    for (const v of videos) {
      assert.equal(v.available, undefined, 'video entries omit available');
      assert.equal(v.baseGems, undefined, 'video entries omit baseGems');
      const caps = v.capabilities as Record<string, unknown>;
      for (const k of ['inputs', 'aspectRatios', 'durations', 'resolutions', 'audio', 'maxReferenceImagesByResolution', 'referenceDurations']) {
        assert.ok(k in caps, `video capability ${k}`);
      }
    }
    for (const i of body.models.filter((m) => m.kind === 'image')) {
      assert.equal(typeof i.available, 'boolean');
      assert.equal(typeof i.baseGems, 'number');
    }
    const audio = body.models.filter((m) => m.kind === 'audio');
    const ops = audio.map((m) => ((m.capabilities as { operations: string[] }).operations ?? []).join(','));
    assert.deepEqual(ops.sort(), ['music', 'speech,voice_clone']);
    for (const m of body.models) assert.equal((m as { pricing?: unknown }).pricing, undefined, 'the rate card stays private');
  });

  it('when the key is missing, then 401 INVALID_API_KEY', async () => {
    await expectError(await s.call('GET', MODELS), 401, 'INVALID_API_KEY');
  });

  it('when the key is malformed, then 401 INVALID_API_KEY', async () => {
    for (const bad of ['gf_123', `gf_${'G'.repeat(64)}`, `gf_${'a'.repeat(63)}`, 'Basic abc', `xx_${'a'.repeat(64)}`]) {
      await expectError(await s.call('GET', MODELS, { key: bad }), 401, 'INVALID_API_KEY');
    }
    const res = await s.call('GET', MODELS, { headers: { authorization: `Basic ${readKey}` } });
    await expectError(res, 401, 'INVALID_API_KEY');
  });

  it('when a well-formed key is unknown, then 401 INVALID_API_KEY', async () => {
    await expectError(await s.call('GET', MODELS, { key: `gf_${'0'.repeat(64)}` }), 401, 'INVALID_API_KEY');
  });

  it('when the key is sent in a query string or an apikey header, then it is not accepted', async () => {
    await expectError(await s.call('GET', `${MODELS}?api_key=${readKey}`), 401, 'INVALID_API_KEY');
    await expectError(await s.call('GET', MODELS, { headers: { apikey: readKey } }), 401, 'INVALID_API_KEY');
  });

  it('when the key is revoked, then every call answers 401 at once', async () => {
    const { id, secret } = await s.key(accountId, { scopes: ['read'] });
    assert.equal((await s.call('GET', MODELS, { key: secret })).status, 200);
    await accounts.revokeKey(s.db, systemClock, id);
    await expectError(await s.call('GET', MODELS, { key: secret }), 401, 'INVALID_API_KEY');
  });

  it('when the key has expired, then 401 INVALID_API_KEY', async () => {
    const { secret } = await s.key(accountId, { scopes: ['read'], expiresAt: new Date(clock.now().getTime() + 60_000) });
    assert.equal((await s.call('GET', MODELS, { key: secret })).status, 200);
    clock.advance(60_000);
    await expectError(await s.call('GET', MODELS, { key: secret }), 401, 'INVALID_API_KEY');
  });

  it('when a generate-only key lists models or reads a task, then 403 INSUFFICIENT_SCOPE', async () => {
    await expectError(await s.call('GET', MODELS, { key: generateKey }), 403, 'INSUFFICIENT_SCOPE');
    await expectError(await s.call('GET', '/api/generate/tasks/task_x', { key: generateKey }), 403, 'INSUFFICIENT_SCOPE');
  });

  it('when a read-only key submits work, then 403 INSUFFICIENT_SCOPE', async () => {
    const res = await s.call('POST', '/api/generate/image', {
      key: readKey,
      headers: { 'idempotency-key': 'a1' },
      body: { model: 'gemforge-image-1', prompt: 'x' },
    });
    await expectError(res, 403, 'INSUFFICIENT_SCOPE');
  });

  it('when the account is blocked or unfinished, then 403 ACCOUNT_BLOCKED or ACCOUNT_UNAVAILABLE', async () => {
    const blocked = await s.account({ state: 'blocked' });
    const unfinished = await s.account({ state: 'unavailable' });
    await expectError(await s.call('GET', MODELS, { key: (await s.key(blocked)).secret }), 403, 'ACCOUNT_BLOCKED');
    await expectError(await s.call('GET', MODELS, { key: (await s.key(unfinished)).secret }), 403, 'ACCOUNT_UNAVAILABLE');
  });

  it('when the route is unknown, then 404 NOT_FOUND in the envelope', async () => {
    await expectError(await s.call('GET', '/api/generate/nothing', { key: readKey }), 404, 'NOT_FOUND');
    await expectError(await s.call('GET', '/', { key: readKey }), 404, 'NOT_FOUND');
    await expectError(await s.call('GET', '/api/generate/nothing'), 404, 'NOT_FOUND');
  });

  it('when the method is not allowed on a known path, then 404 NOT_FOUND (never 405)', async () => {
    await expectError(await s.call('DELETE', MODELS, { key: readKey }), 404, 'NOT_FOUND');
    await expectError(await s.call('PUT', '/api/generate/image', { key: readKey }), 404, 'NOT_FOUND');
  });

  it('when the JSON body is malformed, then 400 in the envelope', async () => {
    const res = await s.call('POST', '/api/generate/image', {
      key: generateKey,
      headers: { 'idempotency-key': 'a2' },
      body: '{"model": ',
    });
    await expectError(res, 400);
  });

  it('when the body is malformed or too large, then a bad key, a missing scope or an unknown route is still told first', async () => {
    const bad = '{"model": ';
    await expectError(await s.call('POST', '/api/generate/image', { headers: { 'idempotency-key': 'b1' }, body: bad }), 401, 'INVALID_API_KEY');
    await expectError(
      await s.call('POST', '/api/generate/image', { key: readKey, headers: { 'idempotency-key': 'b1' }, body: bad }),
      403,
      'INSUFFICIENT_SCOPE',
    );
    await expectError(await s.call('POST', '/api/generate/nothing', { key: generateKey, body: bad }), 404, 'NOT_FOUND');
    const big = JSON.stringify({ model: 'x', prompt: 'p'.repeat(2_000_000) });
    await expectError(await s.call('POST', '/api/generate/image', { headers: { 'idempotency-key': 'b1' }, body: big }), 401, 'INVALID_API_KEY');
    await expectError(await s.call('POST', '/api/generate/image', { key: generateKey, headers: { 'idempotency-key': 'b1' }, body: big }), 413);
  });

  it('when an asset upload claims application/json, then 422 unsupported Content-Type, not a JSON error', async () => {
    const res = await s.call('POST', '/api/generate/assets', { key: generateKey, headers: { 'content-type': 'application/json' }, body: '{"not": "media"}' });
    await expectError(res, 422, 'INVALID_REQUEST');
  });

  it('when the body is valid JSON but not an object, then 422 INVALID_REQUEST; an undecodable gzip body, then 400', async () => {
    for (const body of ['null', '"text"', '7']) {
      await expectError(await s.call('POST', '/api/generate/image', { key: generateKey, headers: { 'idempotency-key': 'a3' }, body }), 422, 'INVALID_REQUEST');
    }
    const gz = await s.call('POST', '/api/generate/image', {
      key: generateKey,
      headers: { 'idempotency-key': 'a4', 'content-encoding': 'gzip' },
      body: 'not gzip',
    });
    await expectError(gz, 400, 'INVALID_REQUEST');
  });

  it('when the auth scheme is written in another case, then the key is still accepted', async () => {
    for (const scheme of ['bearer', 'BEARER']) {
      const res = await s.call('GET', MODELS, { headers: { authorization: `${scheme} ${readKey}` } });
      assert.equal(res.status, 200);
    }
  });

  it('when a task ID cannot be an ID at all (too long), then 404 NOT_FOUND, not 422', async () => {
    await expectError(await s.call('GET', `/api/generate/tasks/${'a'.repeat(200)}`, { key: readKey }), 404, 'NOT_FOUND');
    const head = await s.call('HEAD', `/api/generate/tasks/${'a'.repeat(200)}`, { key: readKey });
    assert.equal(head.status, 404);
  });

  it('when the extraction names another model, then 422 MODEL_UNAVAILABLE naming the analysis model', async () => {
    const res = await s.call('POST', '/api/generate/extract/video', {
      key: generateKey,
      headers: { 'idempotency-key': 'a5' },
      body: { model: 'gemforge-text-1', videoAssetId: 'asset_0123456789abcdef01234567' },
    });
    assert.equal(res.status, 422);
    const e = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(e.error.code, 'MODEL_UNAVAILABLE');
    assert.match(e.error.message, /gemforge-video-analysis-1/);
  });

  it('when a field breaks the contract, then 422 INVALID_REQUEST naming it', async () => {
    const res = await s.call('POST', '/api/generate/image', {
      key: generateKey,
      headers: { 'idempotency-key': 'a3' },
      body: { model: 'gemforge-image-1', prompt: 'x', unknownField: 1 },
    });
    assert.equal(res.status, 422);
    const e = await errorOf(res);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, /unknownField/);
  });

  it('when the Idempotency-Key is missing or malformed on a spending call, then 422 INVALID_REQUEST', async () => {
    const body = { model: 'gemforge-image-1', prompt: 'x' };
    await expectError(await s.call('POST', '/api/generate/image', { key: generateKey, body }), 422, 'INVALID_REQUEST');
    const bad = await s.call('POST', '/api/generate/image', { key: generateKey, body, headers: { 'idempotency-key': 'has space' } });
    await expectError(bad, 422, 'INVALID_REQUEST');
    const long = await s.call('POST', '/api/generate/image', { key: generateKey, body, headers: { 'idempotency-key': 'a'.repeat(129) } });
    await expectError(long, 422, 'INVALID_REQUEST');
  });

  it('when a JSON body is larger than its operation allows, then 413', async () => {
    const res = await s.call('POST', '/api/generate/extract/video', {
      key: generateKey,
      headers: { 'idempotency-key': 'a4' },
      body: { model: 'gemforge-video-analysis-1', videoAssetId: 'x', prompt: 'p'.repeat(17_000) },
    });
    await expectError(res, 413);
  });

  it('when a HEAD request fails, then it carries the status and no body', async () => {
    const res = await s.call('HEAD', '/api/generate/tasks/task_x');
    assert.equal(res.status, 401);
    assert.equal((await res.text()).length, 0);
  });

  it('when a client sends its own x-request-id, then it is echoed; otherwise one is minted', async () => {
    const res = await s.call('GET', MODELS, { key: readKey, headers: { 'x-request-id': 'client-trace-0001' } });
    assert.equal(res.headers.get('x-request-id'), 'client-trace-0001');
    const other = await s.call('GET', MODELS, { key: readKey });
    assert.match(other.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{32}$/);
  });
});
