/**
 * Client pieces without a server: which errors may be retried, the backoff
 * and polling schedules, identities, the error family, content-type guessing,
 * --param parsing and the SSE reader.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { delayAt, jittered, retryReason, withRetries } from '../../client/retry.ts';
import { assertIdempotencyKey, IDEMPOTENCY_KEY_PATTERN, newIdempotencyKey } from '../../client/idempotency.ts';
import {
  AuthenticationError,
  ConflictError,
  ConnectionError,
  errorFromResponse,
  GemforgeError,
  PaymentRequiredError,
  PayloadTooLargeError,
  PermissionError,
  ServerError,
  ValidationError,
  BadRequestError,
  NotFoundError,
  hintFor,
} from '../../client/errors.ts';
import { waitForTask, TaskWaitTimeout, type Task } from '../../client/tasks.ts';
import { sseData } from '../../client/chat.ts';
import { guessContentType, sniffContentType } from '../../client/uploads.ts';
import { parseParams, UsageError } from '../../client/cli/params.ts';

const res = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers });
const err = (status: number, code?: string, headers: Record<string, string> = {}) =>
  errorFromResponse(res(status, headers), { error: { code, message: `m ${code}` } }, 'k-1');

describe('client units', () => {
  it('when errors are classified, then only 503, 502, REQUEST_UNCERTAIN, REFERENCES_PROCESSING and lost (not refused) connections may be retried', () => {
    assert.equal(retryReason(err(503, 'PROVIDER_UNAVAILABLE')), 'unavailable');
    assert.equal(retryReason(err(503, 'WORKFLOW_UNAVAILABLE')), 'unavailable');
    assert.equal(retryReason(err(502, 'PROVIDER_ERROR')), 'unavailable');
    assert.equal(retryReason(err(409, 'REQUEST_UNCERTAIN')), 'uncertain');
    assert.equal(retryReason(err(409, 'REFERENCES_PROCESSING')), 'references');
    assert.equal(retryReason(new ConnectionError({ message: 'reset' })), 'network');
    // Node's fetch nests the socket error: TypeError → Error or AggregateError (one per address) with the code.
    const refusedOne = new ConnectionError({
      message: 'fetch failed',
      cause: new TypeError('fetch failed', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }),
    });
    const refusedAll = new ConnectionError({
      message: 'fetch failed',
      cause: new TypeError('fetch failed', {
        cause: Object.assign(new AggregateError([Object.assign(new Error('::1'), { code: 'ECONNREFUSED' })]), { code: 'ECONNREFUSED' }),
      }),
    });
    const reset = new ConnectionError({
      message: 'fetch failed',
      cause: new TypeError('fetch failed', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }),
    });
    assert.deepEqual([refusedOne.refused, refusedAll.refused, reset.refused], [true, true, false]);
    assert.equal(retryReason(refusedOne), undefined, 'a refused connection sent nothing: not retried');
    assert.equal(retryReason(reset), 'network');
    for (const [status, code] of [
      [409, 'IDEMPOTENCY_CONFLICT'],
      [409, 'REQUEST_FAILED'],
      [409, 'PRICE_CHANGED'],
      [409, 'ANALYSIS_FAILED'],
      [402, 'API_KEY_LIMIT'],
      [402, 'LLM_QUOTA_EXHAUSTED'],
      [422, 'INVALID_REQUEST'],
      [400, undefined],
      [401, 'INVALID_API_KEY'],
      [403, 'INSUFFICIENT_SCOPE'],
      [404, 'NOT_FOUND'],
      [413, 'INVALID_REQUEST'],
    ] as const) {
      assert.equal(retryReason(err(status, code)), undefined, `${status} ${code}`);
    }
    assert.equal(retryReason(err(409, 'REQUEST_UNCERTAIN', { 'x-should-retry': 'false' })), undefined, 'x-should-retry: false wins');
    assert.equal(retryReason(new Error('plain')), undefined);
  });

  it('when a response is an error, then the class follows the status family and code, message and request id are kept', () => {
    const cases: Array<[number, typeof GemforgeError]> = [
      [400, BadRequestError],
      [401, AuthenticationError],
      [402, PaymentRequiredError],
      [403, PermissionError],
      [404, NotFoundError],
      [409, ConflictError],
      [413, PayloadTooLargeError],
      [422, ValidationError],
      [502, ServerError],
      [503, ServerError],
    ];
    for (const [status, Class] of cases) {
      const e = errorFromResponse(res(status, { 'x-request-id': 'req-1' }), { error: { code: 'C', message: 'msg' } }, 'k');
      assert.ok(e instanceof Class && e instanceof GemforgeError, String(status));
      assert.deepEqual([e.status, e.code, e.message, e.requestId, e.idempotencyKey, e.name], [status, 'C', 'msg', 'req-1', 'k', Class.name]);
    }
    const noBody = errorFromResponse(res(404), undefined);
    assert.equal(noBody.code, undefined);
    assert.equal(noBody.message, 'HTTP 404');
    assert.match(hintFor('REQUEST_UNCERTAIN'), /same key/);
    assert.match(hintFor(undefined, 503), /back off/);
  });

  it('when retries run, then the same identity is used, delays follow the schedule, and the final error carries key and attempts', async () => {
    const slept: number[] = [];
    let calls = 0;
    const error = await withRetries('the-key', { delaysMs: [10, 20], jitter: 0, sleep: async (ms) => void slept.push(ms) }, undefined, async () => {
      calls++;
      throw err(503, 'TEMPORARILY_UNAVAILABLE');
    }).catch((e: unknown) => e as GemforgeError);
    assert.equal(calls, 4);
    assert.deepEqual(slept, [10, 20, 20]);
    assert.equal(error.idempotencyKey, 'the-key');
    assert.equal(error.attempts, 4);
    let n = 0;
    assert.equal(
      await withRetries('k', { sleep: async () => {} }, undefined, async () => (++n < 3 ? Promise.reject(err(409, 'REQUEST_UNCERTAIN')) : 'ok')),
      'ok',
    );
    const aborted = new AbortController();
    aborted.abort();
    let once = 0;
    await assert.rejects(
      withRetries('k', {}, aborted.signal, async () => {
        once++;
        throw err(503);
      }),
    );
    assert.equal(once, 1, 'an aborted operation is not retried');
  });

  it('when delays are jittered, then they stay within ± the fraction and the schedule repeats its last step', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (base, jitter, r) => {
          const d = jittered(base, jitter, () => r);
          return d >= Math.floor(base * (1 - jitter)) && d <= Math.ceil(base * (1 + jitter));
        },
      ),
    );
    assert.deepEqual(
      [0, 1, 2, 3, 4, 9].map((i) => delayAt([2000, 4000, 8000, 15000], i)),
      [2000, 4000, 8000, 15000, 15000, 15000],
    );
  });

  it('when identities are made, then each is new and matches the contract pattern; bad ones are refused', () => {
    const keys = new Set(Array.from({ length: 200 }, () => newIdempotencyKey()));
    assert.equal(keys.size, 200);
    for (const k of keys) assert.match(k, IDEMPOTENCY_KEY_PATTERN);
    assert.match(newIdempotencyKey('order.7:img'), /^order\.7:img-/);
    for (const bad of ['', 'a b', 'ü', 'x'.repeat(129), 'a/b']) assert.throws(() => assertIdempotencyKey(bad), TypeError);
    assertIdempotencyKey('x'.repeat(128));
  });

  it('when a task is polled with a fake clock, then reads follow 2, 4, 8, 15, 15 s and the time-out keeps the task ID', async () => {
    let now = 0;
    const slept: number[] = [];
    const task = (status: Task['status']) => ({ id: 't1', status }) as Task;
    const statuses: Task['status'][] = ['queued', 'processing', 'processing', 'processing', 'processing', 'succeeded'];
    let reads = 0;
    const done = await waitForTask(async () => task(statuses[reads++]), 't1', {
      jitter: 0,
      now: () => now,
      sleep: async (ms) => {
        slept.push(ms);
        now += ms;
      },
    });
    assert.equal(done.status, 'succeeded');
    assert.deepEqual(slept, [2000, 4000, 8000, 15000, 15000]);
    now = 0;
    slept.length = 0;
    const timeout = await waitForTask(async () => task('processing'), 't1', {
      jitter: 0,
      maxWaitMs: 20_000,
      now: () => now,
      sleep: async (ms) => {
        slept.push(ms);
        now += ms;
      },
    }).catch((e: unknown) => e);
    assert.ok(timeout instanceof TaskWaitTimeout);
    assert.equal(timeout.taskId, 't1');
    assert.deepEqual(slept, [2000, 4000, 8000, 6000], 'the last sleep is cut to the bound');
    // A transient read failure is polled through; a 404 is not.
    let flaky = 0;
    const after503 = await waitForTask(async () => (flaky++ === 0 ? Promise.reject(err(503)) : task('succeeded')), 't1', { sleep: async () => {} });
    assert.equal(after503.status, 'succeeded');
    await assert.rejects(
      waitForTask(async () => Promise.reject(err(404, 'NOT_FOUND')), 't1', { sleep: async () => {} }),
      NotFoundError,
    );
  });

  it('when SSE bytes arrive in arbitrary pieces, then the events are the same', async () => {
    const text = 'data: {"a":1}\n\n: comment\r\ndata: line1\r\ndata: line2\r\n\r\nevent: x\rdata: [DONE]\r\rdata: unterminated';
    const expected = ['{"a":1}', 'line1\nline2', '[DONE]'];
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: text.length - 1 }), { maxLength: 6 }), async (cuts) => {
        const bounds = [0, ...cuts.sort((a, b) => a - b), text.length];
        const bytes = new TextEncoder().encode(text);
        const stream = new ReadableStream<Uint8Array>({
          start(c) {
            for (let i = 0; i < bounds.length - 1; i++) c.enqueue(bytes.slice(bounds[i], bounds[i + 1]));
            c.close();
          },
        });
        const got: string[] = [];
        for await (const d of sseData(stream)) got.push(d);
        assert.deepEqual(got, expected);
      }),
      { numRuns: 50 },
    );
  });

  it('when media is sniffed, then magic numbers decide and extensions refine within a container', () => {
    const b = (...x: Array<number | string>) => Buffer.concat(x.map((v) => (typeof v === 'string' ? Buffer.from(v, 'latin1') : Buffer.from([v]))));
    assert.equal(sniffContentType(b(0x89, 'PNG\r\n')), 'image/png');
    assert.equal(sniffContentType(b(0xff, 0xd8, 0xff, 0xe0)), 'image/jpeg');
    assert.equal(sniffContentType(b('GIF89a')), 'image/gif');
    assert.equal(sniffContentType(b('RIFF', 0, 0, 0, 0, 'WEBPVP8 ')), 'image/webp');
    assert.equal(sniffContentType(b('RIFF', 0, 0, 0, 0, 'WAVEfmt ')), 'audio/wav');
    assert.equal(sniffContentType(b(0, 0, 0, 0x20, 'ftypisom')), 'video/mp4');
    assert.equal(sniffContentType(b(0, 0, 0, 0x20, 'ftypqt  ')), 'video/quicktime');
    assert.equal(sniffContentType(b(0, 0, 0, 0x20, 'ftypM4A ')), 'audio/mp4');
    assert.equal(sniffContentType(b(0x1a, 0x45, 0xdf, 0xa3)), 'video/webm');
    assert.equal(sniffContentType(b('OggS', 0)), 'audio/ogg');
    assert.equal(sniffContentType(b('fLaC', 0)), 'audio/flac');
    assert.equal(sniffContentType(b('ID3', 4)), 'audio/mpeg');
    assert.equal(sniffContentType(b(0xff, 0xfb, 0x90, 0)), 'audio/mpeg');
    assert.equal(sniffContentType(b(0xff, 0xf1, 0x50, 0)), 'audio/aac');
    assert.equal(sniffContentType(b('hello')), undefined);
    assert.equal(guessContentType(b(0, 0, 0, 0x20, 'ftypisom'), 'song.m4a'), 'audio/mp4');
    assert.equal(guessContentType(b(0x1a, 0x45, 0xdf, 0xa3), 'voice.weba'), 'audio/webm');
    assert.equal(guessContentType(b(0x89, 'PNG\r\n'), 'misnamed.jpg'), 'image/png', 'the bytes win across containers');
    assert.equal(guessContentType(b('????'), 'clip.MOV'), 'video/quicktime');
    assert.equal(guessContentType(undefined, 'notes.txt'), undefined);
  });

  it('when --param pairs are parsed, then contract types decide numbers, booleans and lists; := passes JSON', () => {
    assert.deepEqual(parseParams('image', ['resolution=1024', 'outputCount=2', 'magicPrompt=true', 'ratio=16:9', 'negativePrompt=a=b']), {
      resolution: '1024',
      outputCount: 2,
      magicPrompt: true,
      ratio: '16:9',
      negativePrompt: 'a=b',
    });
    assert.deepEqual(parseParams('video', ['duration=4', 'audio=false', 'referenceVideos=a, b']), { duration: 4, audio: false, referenceVideos: ['a', 'b'] });
    assert.deepEqual(parseParams('audio', ['duration=30', 'speed=1.5', 'x:={"y":[1]}']), { duration: '30', speed: 1.5, x: { y: [1] } });
    for (const bad of ['nope', 'outputCount=two', 'magicPrompt=yes', 'x:={']) assert.throws(() => parseParams('image', [bad]), UsageError);
  });
});
