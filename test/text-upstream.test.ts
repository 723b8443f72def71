/**
 * The OpenAI-compatible upstream provider at the real server, against a small
 * fake upstream started here. The last user message picks the fake's behaviour
 * (`mode:…`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import { errorOf, startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { generateKeyOnDisk, startServerChild } from './helpers/child.ts';
import { until } from './helpers/poll.ts';
import { readStream } from './helpers/sse.ts';
import type { ReservationRow } from '../server/storage/ledger.ts';
import { requestViolation, responseViolation, schemaViolation } from './helpers/upstream-contracts.ts';

const PATH = '/api/generate/text/v1/chat/completions';
let n = 0;
const newKey = () => `up-${process.pid}-${++n}`;

interface Seen {
  url: string;
  authorization: string | undefined;
  /** The gateway's end of the connection the request came on. */
  port: number | undefined;
  /** Set once the fake finished answering. */
  answered?: boolean;
  body: Record<string, unknown> & { messages: Array<{ role: string; content: string }> };
}

/**
 * What the fake received or answered outside OpenAI's published document
 * (test/fixtures/upstream-contracts/openai.json, `POST /chat/completions`):
 * a request the real API would refuse, or an answer it never gives. The file
 * fails at its end when there is any.
 */
const violations: string[] = [];
after(() => assert.deepEqual(violations, [], 'requests and answers held to the published chat-completions contract'));

/** One stream frame, held to the documented chunk shape (CreateChatCompletionStreamResponse). */
function frame(json: Record<string, unknown>): string {
  const wrong = schemaViolation('openai', 'CreateChatCompletionStreamResponse', json);
  if (wrong) violations.push(`the fake's chunk: ${wrong}`);
  return `data: ${JSON.stringify(json)}\n\n`;
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
  frame({ id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'fake-llama', choices: [{ index: 0, delta, finish_reason: finish }], ...extra });

/** The last frame of a stream asked with `stream_options.include_usage`: no choices, the usage. */
const usageChunk = (usage: Record<string, unknown>) =>
  frame({ id: 'up-1', object: 'chat.completion.chunk', created: 1, model: 'fake-llama', choices: [], usage });

/** A JSON answer, held to the document's shape for its status (an error is its ErrorResponse). */
function answer(res: http.ServerResponse, status: number, json: Record<string, unknown>, headers: Record<string, string> = {}): void {
  const wrong = responseViolation('openai', 'POST', '/v1/chat/completions', status, json, () => 'ErrorResponse');
  if (wrong) violations.push(`the fake's answer: ${wrong}`);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(json));
}

const apiError = (message: string, type: string, param: string | null = null, code: string | null = null) => ({ error: { message, type, param, code } });

/** A whole completion as the document gives it (`choices[].message` with its refusal, `logprobs`). */
const completion = (content: string, finish: string, usage: Record<string, unknown>) => ({
  id: 'up-2',
  object: 'chat.completion',
  created: 1,
  model: 'fake-llama',
  choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: finish }],
  usage,
});

/** A fake OpenAI-compatible server, holding requests to OpenAI's published contract. */
function fakeUpstream(seen: Seen[]): http.Server {
  const throttled = new Set<string>();
  return http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as Seen['body'];
      const entry: Seen = { url: req.url ?? '', authorization: req.headers.authorization, port: req.socket.remotePort, body };
      seen.push(entry);
      res.on('finish', () => (entry.answered = true));
      // What the published document refuses is refused as the API does, and fails the file.
      const violation = requestViolation('openai', 'POST', (req.url ?? '').split('?')[0]!, body);
      if (violation) {
        violations.push(`request: ${violation}`);
        answer(res, 400, apiError(violation, 'invalid_request_error'));
        return;
      }
      const mode = /mode:([a-z0-9-]+)/.exec(body.messages.at(-1)?.content ?? '')?.[1] ?? 'default';
      // OpenAI's reasoning models refuse max_tokens and their own sampling parameters (the reasoning
      // guide says so in prose; the document cannot): refused as the API refuses it, and recorded.
      const refused = /^(o1|o3|o4|gpt-5)/.test(String(body.model)) && (['max_tokens', 'temperature', 'top_p'] as const).find((f) => body[f] !== undefined);
      if (refused) {
        const message =
          refused === 'max_tokens'
            ? "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
            : `Unsupported parameter: '${refused}' is not supported with this model.`;
        violations.push(`request: ${message}`);
        answer(res, 400, apiError(message, 'invalid_request_error', refused, 'unsupported_parameter'));
        return;
      }
      // once-429: the first request of this content is throttled, the next answered.
      const once = mode === 'once-429' && !throttled.has(body.messages.at(-1)!.content) && throttled.add(body.messages.at(-1)!.content);
      if (['400', '429', '500', '502', '503'].includes(mode) || once) {
        const status = once ? 429 : Number(mode);
        answer(
          res,
          status,
          apiError(`fake ${status}`, status === 429 ? 'rate_limit_exceeded' : status === 400 ? 'invalid_request_error' : 'server_error'),
          status === 429 ? { 'retry-after': '3' } : {},
        );
        return;
      }
      if (mode === 'huge-json') {
        // One JSON completion of 20 MiB: above what is read of a JSON answer.
        answer(res, 200, completion('x'.repeat(20 * 1024 * 1024), 'stop', { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 }));
        return;
      }
      if (mode === 'huge-event' || mode === 'echo-key') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        // An event of 2 MiB (its line arrives in many chunks), or an error frame echoing the credentials it was sent
        // (an error mid-stream is not in the document, but upstreams send one; the adapter must survive it).
        const usage = { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 };
        if (mode === 'huge-event') res.write(chunk({ content: 'y'.repeat(2 * 1024 * 1024) }, 'stop', { usage }));
        else
          res.write(
            `data: ${JSON.stringify(apiError(`Incorrect API key provided: ${req.headers.authorization}; key ${req.headers.authorization?.slice(7)}`, 'invalid_request_error'))}\n\n`,
          );
        res.end('data: [DONE]\n\n');
        return;
      }
      if (mode === 'json') {
        answer(res, 200, completion('Whole JSON answer', 'length', { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 }));
        return;
      }
      // CRLF line ends and a comment line: the reader must cope with both.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': keep-alive\r\n\r\n');
      res.write(chunk({ role: 'assistant', content: '' }).replaceAll('\n', '\r\n'));
      res.write(chunk({ content: 'Hello' }));
      res.write(chunk({ content: ' from upstream' }));
      if (mode === 'break') {
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      res.write(chunk({}, 'stop'));
      if (mode === 'default') res.write(usageChunk({ prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 }));
      if (mode === 'reasoning') {
        // As OpenAI bills a reasoning model: the hidden reasoning counted inside completion_tokens, broken out in its details.
        const details = { reasoning_tokens: 200, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 };
        res.write(
          usageChunk({
            prompt_tokens: 11,
            completion_tokens: 203,
            total_tokens: 214,
            prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
            completion_tokens_details: details,
          }),
        );
      }
      if (mode === 'huge-usage') res.write(usageChunk({ prompt_tokens: 5_000_000, completion_tokens: 5_000_000, total_tokens: 10_000_000 }));
      if (mode === 'late-end') {
        // [DONE] first, the body's end a moment later: what an upstream may do.
        res.write('data: [DONE]\n\n');
        setTimeout(() => res.end(), 30);
        return;
      }
      res.end('data: [DONE]\n\n');
    });
  });
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('text generation through an OpenAI-compatible upstream', () => {
  const seen: Seen[] = [];
  const upstream = fakeUpstream(seen);
  let s: TestServer;
  let key: string;
  let accountId: string;

  before(async () => {
    const base = await listen(upstream);
    s = await startTestServer({
      env: { TEXT_UPSTREAM_URL: `${base}/v1`, TEXT_UPSTREAM_API_KEY: 'sk-fake', TEXT_UPSTREAM_MODELS: 'gemforge-text-1=fake-llama' },
    });
    const u = await s.user({ llmAllowance: 1000 });
    key = u.secret;
    accountId = u.accountId;
  });
  after(async () => {
    await s.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  const post = (idemKey: string, body: unknown) => s.call('POST', PATH, { key, body, headers: { 'idempotency-key': idemKey } });
  const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'gemforge-text-1', messages: [{ role: 'user', content }], ...extra });
  const reservation = async (ref: string) => (await s.db('reservations').where({ ref }).first()) as ReservationRow;
  const lastReservation = async () => (await s.db('reservations').where({ account_id: accountId }).orderBy('created_at', 'desc').first()) as ReservationRow;

  it('when a completion is asked, then the request is forwarded with the mapped model, key and parameters, and usage comes from the upstream', async () => {
    const res = await post(newKey(), ask('mode:default hi', { temperature: 0.4, top_p: 0.5, max_tokens: 300, response_format: { type: 'text' } }));
    assert.equal(res.status, 200);
    const c = (await res.json()) as { id: string; choices: Array<{ message: { content: string }; finish_reason: string }>; usage: unknown; model: string };
    assert.equal(c.choices[0].message.content, 'Hello from upstream');
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.equal(c.model, 'gemforge-text-1');
    assert.deepEqual(c.usage, { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
    const got = seen.at(-1)!;
    assert.equal(got.url, '/v1/chat/completions');
    assert.equal(got.authorization, 'Bearer sk-fake');
    assert.equal(got.body.model, 'fake-llama');
    assert.equal(got.body.temperature, 0.4);
    assert.equal(got.body.top_p, 0.5);
    assert.equal(got.body.max_tokens, 300);
    assert.deepEqual(got.body.response_format, { type: 'text' });
    assert.equal(got.body.stream, true);
    assert.deepEqual(got.body.stream_options, { include_usage: true });
    const r = await reservation(c.id);
    assert.equal(r.state, 'settled');
    assert.equal(r.charged, 1);
  });

  it('when the client streams, then upstream deltas are re-framed and the final chunk carries the upstream usage', async () => {
    const r = await readStream(await post(newKey(), ask('mode:default stream', { stream: true })));
    assert.equal(r.done, true);
    assert.equal(r.content, 'Hello from upstream');
    assert.deepEqual(r.usage, { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
    assert.equal(r.finishReason, 'stop');
  });

  it('when the upstream ends its body after [DONE], then the rest is read and the next completion goes over the same connection', async () => {
    const ports: Array<number | undefined> = [];
    for (let i = 0; i < 2; i++) {
      const r = await readStream(await post(newKey(), ask(`mode:late-end ${i}`, { stream: true })));
      assert.equal(r.done, true);
      assert.equal(r.content, 'Hello from upstream');
      const got = seen.at(-1)!;
      ports.push(got.port);
      await until('the upstream finished its answer', () => got.answered === true);
    }
    assert.equal(ports[1], ports[0], 'a body left at [DONE] was not drained: its connection was closed');
  });

  it('when the upstream reports no usage, then the whole conservative reservation is charged', async () => {
    const res = await post(newKey(), ask('mode:no-usage'));
    assert.equal(res.status, 200);
    const c = (await res.json()) as { id: string };
    const r = await reservation(c.id);
    assert.equal(r.charged, r.hold_allowance + r.hold_paid);
    assert.ok(r.charged > 1);
  });

  it('when the upstream reports usage above the reservation, then the charge is clamped to the reservation', async () => {
    const c = (await (await post(newKey(), ask('mode:huge-usage'))).json()) as { id: string };
    const r = await reservation(c.id);
    assert.equal(r.charged, r.hold_allowance + r.hold_paid);
  });

  it('when the upstream answers one JSON completion instead of a stream, then it is accepted', async () => {
    const r = await readStream(await post(newKey(), ask('mode:json', { stream: true })));
    assert.equal(r.content, 'Whole JSON answer');
    assert.equal(r.finishReason, 'length');
    assert.deepEqual(r.usage, { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 });
  });

  it('when the upstream rejects the request (4xx), then 502 PROVIDER_ERROR, nothing charged, and replays answer REQUEST_FAILED', async () => {
    const k = newKey();
    const first = await post(k, ask('mode:400'));
    assert.equal(first.headers.get('x-should-retry'), 'false', 'a final answer: an SDK must not retry it');
    const e = await errorOf(first);
    assert.deepEqual([e.status, e.code], [502, 'PROVIDER_ERROR']);
    const r = await lastReservation();
    assert.deepEqual([r.state, r.charged], ['released', 0]);
    const again = await post(k, ask('mode:400'));
    assert.equal(again.headers.get('x-should-retry'), 'false');
    assert.equal((await errorOf(again)).code, 'REQUEST_FAILED');
  });

  it('when the upstream is overloaded (503), then 503 PROVIDER_UNAVAILABLE even for a stream, and nothing is charged', async () => {
    const e = await errorOf(await post(newKey(), ask('mode:503', { stream: true })));
    assert.deepEqual([e.status, e.code], [503, 'PROVIDER_UNAVAILABLE']);
    assert.equal((await lastReservation()).state, 'released');
  });

  it('when a gateway answers 502 (the model may have run behind it), then 409 REQUEST_UNCERTAIN and the reservation stays held', async () => {
    const k = newKey();
    assert.equal((await errorOf(await post(k, ask('mode:502')))).code, 'REQUEST_UNCERTAIN');
    assert.equal((await lastReservation()).state, 'held');
    assert.equal((await errorOf(await post(k, ask('mode:502')))).code, 'REQUEST_UNCERTAIN');
  });

  for (const status of ['429', '500', '503']) {
    it(`when the upstream answers ${status} before any output, then 503 with Retry-After, nothing charged, and the same identity is dispatched again`, async () => {
      const k = newKey();
      const before = seen.length;
      const res = await post(k, ask(`mode:${status}`));
      assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After');
      assert.notEqual(res.headers.get('x-should-retry'), 'false');
      const e = await errorOf(res);
      assert.deepEqual([e.status, e.code], [503, 'PROVIDER_UNAVAILABLE']);
      assert.deepEqual([(await lastReservation()).state, (await lastReservation()).charged], ['released', 0]);
      const again = await errorOf(await post(k, ask(`mode:${status}`)));
      assert.equal(again.code, 'PROVIDER_UNAVAILABLE', 'not REQUEST_FAILED: the identity was kept');
      assert.equal(seen.length - before, 2, 'the replay was dispatched');
    });
  }

  it('when the upstream throttles once and the client retries the same identity, then the retry completes, charged once', async () => {
    const k = newKey();
    const throttled = await post(k, ask('mode:once-429 please'));
    assert.equal(throttled.status, 503);
    assert.equal(throttled.headers.get('retry-after'), '3', "the upstream's Retry-After");
    const res = await post(k, ask('mode:once-429 please'));
    assert.equal(res.status, 200);
    const rows = (await s.db('reservations').where({ account_id: accountId }).orderBy('created_at', 'desc').limit(2)) as ReservationRow[];
    assert.deepEqual(rows.map((r) => r.state).sort(), ['released', 'settled']);
    const count = (await s.db('reservations').where({ account_id: accountId })).length;
    const replay = await post(k, ask('mode:once-429 please'));
    assert.equal(replay.status, 200, 'a replay returns the retained answer');
    assert.equal((await s.db('reservations').where({ account_id: accountId })).length, count, 'no new reservation');
  });

  it('when the last user message carries a text test card, then the scenario layer plays it over the upstream provider as over the local one', async () => {
    const before = seen.length;
    const busyKey = newKey();
    const busy = await errorOf(await post(busyKey, ask('mode:default [[scenario:provider-unavailable]]')));
    assert.deepEqual([busy.status, busy.code], [503, 'PROVIDER_UNAVAILABLE']);
    assert.equal(seen.length, before, 'refused before the upstream is asked');
    assert.equal(await s.db('idempotency_records').where({ idem_key: busyKey }).first(), undefined, 'nothing claimed');

    const failedKey = newKey();
    const broken = await readStream(await post(failedKey, ask('mode:default [[scenario:stream-error:1]]', { stream: true })));
    assert.equal(broken.content, 'Hello');
    assert.equal(broken.done, false);
    assert.equal(broken.error?.code, 'PROVIDER_ERROR');
    assert.equal(seen.at(-1)!.body.messages.at(-1)!.content, 'mode:default', 'the marker never reaches the upstream');
    const billed = await lastReservation();
    assert.equal(billed.state, 'settled');
    const replay = await errorOf(await post(failedKey, ask('mode:default [[scenario:stream-error:1]]', { stream: true })));
    assert.deepEqual([replay.status, replay.code], [502, 'PROVIDER_ERROR']);

    const lostKey = newKey();
    assert.equal((await errorOf(await post(lostKey, ask('mode:default [[scenario:uncertain:1]]')))).code, 'REQUEST_UNCERTAIN');
    assert.equal((await lastReservation()).state, 'held');
    assert.equal((await errorOf(await post(lostKey, ask('mode:default [[scenario:uncertain:1]]')))).code, 'REQUEST_UNCERTAIN');
  });

  it('when one upstream event is larger than the reader takes (1 MiB), then the stream fails as a broken one: 409 REQUEST_UNCERTAIN, the reservation held', async () => {
    const k = newKey();
    const e = await errorOf(await post(k, ask('mode:huge-event')));
    assert.deepEqual([e.status, e.code], [409, 'REQUEST_UNCERTAIN']);
    assert.equal((await lastReservation()).state, 'held');
  });

  it('when the upstream answers one JSON completion above the size read (16 MiB), then it is refused as unreadable: 409 REQUEST_UNCERTAIN, the reservation held', async () => {
    const e = await errorOf(await post(newKey(), ask('mode:huge-json')));
    assert.deepEqual([e.status, e.code], [409, 'REQUEST_UNCERTAIN']);
    assert.equal((await lastReservation()).state, 'held');
  });

  it('when the upstream stream breaks off, then the client stream ends with a REQUEST_UNCERTAIN frame and no [DONE]; the reservation stays held', async () => {
    const k = newKey();
    const r = await readStream(await post(k, ask('mode:break', { stream: true })));
    assert.equal(r.content, 'Hello from upstream');
    assert.equal(r.done, false);
    assert.equal(r.error?.code, 'REQUEST_UNCERTAIN');
    assert.equal((await lastReservation()).state, 'held');
    assert.equal((await errorOf(await post(k, ask('mode:break', { stream: true })))).code, 'REQUEST_UNCERTAIN');
  });
});

describe('text generation through a reasoning model upstream', () => {
  const seen: Seen[] = [];
  const upstream = fakeUpstream(seen);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { TEXT_UPSTREAM_URL: await listen(upstream), TEXT_UPSTREAM_MODELS: 'gemforge-text-1=o3-mini' } });
  });
  after(async () => {
    await s.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  it('when the upstream model is a reasoning model, then the limit goes as max_completion_tokens, temperature and top_p stay out, and its reasoning tokens are metered', async () => {
    const u = await s.user({ llmAllowance: 1000 });
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'mode:reasoning think' }], max_tokens: 500, temperature: 0.3, top_p: 0.9 };
    const res = await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': newKey() } });
    assert.equal(res.status, 200, await res.clone().text());
    const c = (await res.json()) as { usage: { completion_tokens: number } };
    const sent = seen.at(-1)!.body;
    assert.equal(sent.max_completion_tokens, 500);
    for (const field of ['max_tokens', 'temperature', 'top_p']) assert.equal(sent[field], undefined, field);
    assert.equal(c.usage.completion_tokens, 203, 'the hidden reasoning is billed as output');
  });

  it('when a text model mapped to o3-mini is streamed with a JSON response format, then it completes within the published contract and the reservation settles on the billed usage', async () => {
    const u = await s.user({ llmAllowance: 1000 });
    const body = {
      model: 'gemforge-text-1',
      messages: [
        { role: 'system', content: 'Answer in JSON.' },
        { role: 'user', content: 'mode:reasoning think' },
      ],
      stream: true,
      response_format: { type: 'json_object' },
    };
    const r = await readStream(await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': newKey() } }));
    assert.equal(r.done, true);
    assert.equal(r.content, 'Hello from upstream');
    assert.deepEqual(r.usage, { prompt_tokens: 11, completion_tokens: 203, total_tokens: 214 });
    const sent = seen.at(-1)!.body;
    assert.equal(sent.max_completion_tokens, 4096, 'the default limit, in the reasoning dialect');
    assert.deepEqual(sent.response_format, { type: 'json_object' });
    const row = (await s.db('reservations').where({ account_id: u.accountId }).first()) as ReservationRow;
    assert.equal(row.state, 'settled');
  });
});

describe('text generation with an unreachable upstream', () => {
  let s: TestServer;
  before(async () => {
    // A port that was just free: nothing listens there.
    const probe = http.createServer();
    const base = await listen(probe);
    await new Promise((r) => probe.close(r));
    s = await startTestServer({ env: { TEXT_UPSTREAM_URL: base, TEXT_UPSTREAM_MODELS: 'gemforge-text-1=fake-llama' } });
  });
  after(() => s.close());

  it('when the connection is refused, then 503 PROVIDER_UNAVAILABLE, nothing charged, and a replay of the identity is tried again (nothing was done)', async () => {
    const u = await s.user({ llmAllowance: 100 });
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'anyone there?' }] };
    const k = newKey();
    const e = await errorOf(await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': k } }));
    assert.deepEqual([e.status, e.code], [503, 'PROVIDER_UNAVAILABLE']);
    const rows = (await s.db('reservations').where({ account_id: u.accountId })) as ReservationRow[];
    assert.deepEqual(
      rows.map((r) => [r.state, r.charged]),
      [['released', 0]],
    );
    const again = await errorOf(await s.call('POST', PATH, { key: u.secret, body, headers: { 'idempotency-key': k } }));
    assert.deepEqual([again.status, again.code], [503, 'PROVIDER_UNAVAILABLE']);
    const after = (await s.db('reservations').where({ account_id: u.accountId })) as ReservationRow[];
    assert.deepEqual(
      after.map((r) => [r.state, r.charged]),
      [
        ['released', 0],
        ['released', 0],
      ],
      'tried again, nothing charged',
    );
  });
});

describe('text upstream errors in the logs', () => {
  it('when an upstream error frame echoes the key it was sent, then the log line carries it scrubbed', async () => {
    const upstream = fakeUpstream([]);
    const base = await listen(upstream);
    const dataDir = tempDataDir();
    const secret = await generateKeyOnDisk(dataDir, 1000);
    const upstreamKey = 'sk-child-secret-0123456789abcdef';
    const child = await startServerChild({
      DATA_DIR: dataDir,
      TEXT_UPSTREAM_URL: `${base}/v1`,
      TEXT_UPSTREAM_API_KEY: upstreamKey,
      TEXT_UPSTREAM_MODELS: 'gemforge-text-1=fake-llama',
    });
    try {
      const res = await fetch(`${child.url}${PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': newKey() },
        body: JSON.stringify({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'mode:echo-key' }] }),
      });
      assert.equal(res.status, 409);
      await until('the failure is logged', () => child.logs.some((l) => l.msg === 'text generation failed'), 10_000);
      const logged = JSON.stringify(child.logs);
      assert.ok(logged.includes('Incorrect API key provided: Bearer [redacted]'), 'the frame is logged, scrubbed');
      assert.ok(!logged.includes('0123456789abcdef'), 'the key never reaches the log');
    } finally {
      await child.kill('SIGTERM');
      upstream.closeAllConnections();
      await new Promise((r) => upstream.close(r));
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
