/**
 * Retries of spending calls at the real server, driven by scenario triggers:
 * one identity per logical operation, the same Idempotency-Key on every
 * attempt, retries only where the spec permits them, and the key attached to
 * whatever is finally thrown. A recording fetch counts requests and keeps the
 * header of each; sleeps are instant.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createGemforgeClient, type GemforgeClient } from '../client/client.ts';
import { ConflictError, PaymentRequiredError, ServerError, ValidationError } from '../client/errors.ts';
import { IDEMPOTENCY_KEY_PATTERN } from '../client/idempotency.ts';
import type { RetryPolicy } from '../client/retry.ts';

interface Recorder {
  gf: GemforgeClient;
  /** Method, path and Idempotency-Key of every request sent. */
  sent: Array<{ method: string; path: string; key: string | null }>;
  /** Delays the client asked to sleep. */
  slept: number[];
}

/** A client whose fetch records each request (and may answer some itself), with instant sleeps. */
function recorder(s: TestServer, apiKey: string, fake?: (n: number, request: Request) => Response | Error | undefined): Recorder {
  const sent: Recorder['sent'] = [];
  const slept: number[] = [];
  const retry: RetryPolicy = { sleep: async (ms) => void slept.push(ms) };
  const gf = createGemforgeClient({
    baseUrl: s.url,
    apiKey,
    retry,
    fetch: async (input, init) => {
      const request = new Request(input, init);
      sent.push({ method: request.method, path: new URL(request.url).pathname, key: request.headers.get('idempotency-key') });
      const faked = fake?.(sent.length, request);
      if (faked instanceof Error) throw faked;
      return faked ?? fetch(request);
    },
  });
  return { gf, sent, slept };
}

const keysOf = (r: Recorder) => [...new Set(r.sent.map((x) => x.key))];

describe('client retries with one identity', () => {
  let s: TestServer;
  let secret: string;
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20', TEXT_STREAM_DELAY_MS: '0' } });
    secret = (await s.user({ gems: 100_000, llmAllowance: 10_000 })).secret;
  });
  after(() => s.close());

  it('when an image submission stays uncertain, then every attempt carries the same key and REQUEST_UNCERTAIN surfaces with that key', async () => {
    const r = recorder(s, secret);
    const error = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox [[scenario:uncertain]]' }).catch((e: unknown) => e);
    assert.ok(error instanceof ConflictError, String(error));
    assert.equal(error.code, 'REQUEST_UNCERTAIN');
    assert.equal(r.sent.length, 4, 'the default policy: 4 attempts');
    assert.equal(error.attempts, 4);
    const keys = keysOf(r);
    assert.equal(keys.length, 1, 'one identity for the whole operation');
    assert.match(keys[0]!, IDEMPOTENCY_KEY_PATTERN);
    assert.equal(error.idempotencyKey, keys[0]);
    assert.equal(r.slept.length, 3);
    assert.ok(r.slept[0] >= 800 && r.slept[0] <= 1200 && r.slept[2] >= 3200 && r.slept[2] <= 4800, `backoff with jitter: ${r.slept}`);
  });

  it('when a text completion stays uncertain, then the same key is replayed and the error keeps it', async () => {
    const r = recorder(s, secret);
    const error = await r.gf.chat.completions
      .create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Lose me [[scenario:uncertain]]' }] }, { retry: { maxAttempts: 3 } })
      .catch((e: unknown) => e);
    assert.ok(error instanceof ConflictError);
    assert.equal(error.code, 'REQUEST_UNCERTAIN');
    assert.equal(r.sent.length, 3);
    assert.deepEqual(keysOf(r), [error.idempotencyKey]);
  });

  it('when the provider is unavailable (503), then the client backs off with the same key and gives up with it attached', async () => {
    const r = recorder(s, secret);
    const error = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox [[scenario:provider-unavailable]]' }).catch((e: unknown) => e);
    assert.ok(error instanceof ServerError);
    assert.equal(error.status, 503);
    assert.equal(error.code, 'PROVIDER_UNAVAILABLE');
    assert.equal(r.sent.length, 4);
    assert.deepEqual(keysOf(r), [error.idempotencyKey]);
    assert.match(error.hint, /same key/);
  });

  it('when a 503 carries Retry-After, then the client waits that long when it is longer than its schedule, and never less than its schedule for Retry-After: 0', async () => {
    const answer = (retryAfter: string) => () =>
      new Response(JSON.stringify({ error: { code: 'TEMPORARILY_UNAVAILABLE', message: 'busy' } }), {
        status: 503,
        headers: { 'content-type': 'application/json', 'retry-after': retryAfter },
      });
    const long = recorder(s, secret, answer('30'));
    await long.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox' }).catch(() => undefined);
    assert.equal(long.sent.length, 4);
    assert.deepEqual(long.slept, [30_000, 30_000, 30_000], 'the server asked for 30 s each time');
    const zero = recorder(s, secret, answer('0'));
    await zero.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox' }).catch(() => undefined);
    assert.equal(zero.slept.length, 3);
    for (const [i, ms] of zero.slept.entries()) assert.ok(ms >= [1000, 2000, 4000][i]! * 0.8, `attempt ${i + 1} waited ${ms} ms`);
  });

  it('when a caller passes its own key, then that key is used on every attempt', async () => {
    const r = recorder(s, secret);
    const error = await r.gf.chat.completions
      .create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: '[[scenario:provider-unavailable]]' }] }, { idempotencyKey: 'my-order-42:text' })
      .catch((e: unknown) => e);
    assert.ok(error instanceof ServerError);
    assert.deepEqual(keysOf(r), ['my-order-42:text']);
    assert.equal(error.idempotencyKey, 'my-order-42:text');
    await assert.rejects(r.gf.images.create({ model: 'gemforge-image-1', prompt: 'x' }, { idempotencyKey: 'has spaces' }), TypeError);
    assert.equal(r.sent.length, 4, 'an invalid key never reaches the server');
  });

  it('when a 503 or a lost connection comes first, then the retry with the same key creates the work once', async () => {
    for (const first of [
      new Response(JSON.stringify({ error: { code: 'TEMPORARILY_UNAVAILABLE', message: 'busy' } }), {
        status: 503,
        headers: { 'content-type': 'application/json' },
      }),
      new TypeError('fetch failed'),
    ]) {
      const r = recorder(s, secret, (n) => (n === 1 ? first : undefined));
      const sub = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a patient fox', parameters: { resolution: '512' } });
      assert.equal(sub.status, 202);
      assert.equal(sub.data.created, true);
      assert.equal(r.sent.length, 2);
      assert.deepEqual(keysOf(r), [sub.idempotencyKey]);
    }
  });

  it('when references are processing, then the client waits on the references schedule and keeps the key', async () => {
    const png = await (
      await import('sharp')
    )
      .default({ create: { width: 8, height: 8, channels: 3, background: '#f00' } })
      .png()
      .toBuffer();
    const asset = await createGemforgeClient({ baseUrl: s.url, apiKey: secret }).assets.upload(png, { contentType: 'image/png' });
    const r = recorder(s, secret);
    const error = await r.gf.images
      .create({ model: 'gemforge-image-1', prompt: 'a fox [[scenario:references-processing]]', referenceAssetIds: [asset.id] })
      .catch((e: unknown) => e);
    assert.ok(error instanceof ConflictError);
    assert.equal(error.code, 'REFERENCES_PROCESSING');
    assert.equal(r.sent.length, 4);
    assert.deepEqual(keysOf(r), [error.idempotencyKey]);
    assert.ok(r.slept[0] >= 1600 && r.slept[0] <= 2400, `references schedule starts at 2 s: ${r.slept}`);
  });

  it('when the answer is PRICE_CHANGED, IDEMPOTENCY_CONFLICT, 422 or 402, then the client sends exactly one request', async () => {
    const r = recorder(s, secret);
    const price = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', maxGems: 0 }).catch((e: unknown) => e);
    assert.ok(price instanceof ConflictError && price.code === 'PRICE_CHANGED');
    assert.equal(price.shouldRetry, false);
    assert.equal(r.sent.length, 1);

    const first = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { resolution: '512' } });
    r.sent.length = 0;
    const conflict = await r.gf.images
      .create({ model: 'gemforge-image-1', prompt: 'a different fox' }, { idempotencyKey: first.idempotencyKey })
      .catch((e: unknown) => e);
    assert.ok(conflict instanceof ConflictError && conflict.code === 'IDEMPOTENCY_CONFLICT');
    assert.equal(conflict.idempotencyKey, first.idempotencyKey);
    assert.equal(r.sent.length, 1);

    r.sent.length = 0;
    const invalid = await r.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { ratio: '7:5' } }).catch((e: unknown) => e);
    assert.ok(invalid instanceof ValidationError && invalid.code === 'INVALID_REQUEST');
    assert.equal(r.sent.length, 1);

    const capped = recorder(s, (await s.user({ gems: 1000, cap: 0 })).secret);
    const payment = await capped.gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox' }).catch((e: unknown) => e);
    assert.ok(payment instanceof PaymentRequiredError && payment.code === 'API_KEY_LIMIT', String(payment));
    assert.equal(capped.sent.length, 1);
    assert.equal(r.slept.length + capped.slept.length, 0, 'no backoff at all');
  });

  it('when an upload fails with 503, then it is not repeated (uploads carry no idempotency)', async () => {
    const r = recorder(s, secret, () => new Response(JSON.stringify({ error: { code: 'TEMPORARILY_UNAVAILABLE', message: 'busy' } }), { status: 503 }));
    await assert.rejects(r.gf.assets.upload(new Uint8Array([0x89, 0x50, 0x4e, 0x47]), { contentType: 'image/png' }), ServerError);
    await assert.rejects(r.gf.voices.create({ file: new Blob([new Uint8Array(10)]), duration: 20, rightsConfirmed: true }), ServerError);
    assert.equal(r.sent.length, 2);
    assert.ok(
      r.sent.every((x) => x.key === null),
      'no Idempotency-Key on uploads',
    );
  });
});
