/**
 * The official `openai` npm SDK against the text endpoint: base URL
 * `{base_url}/api/generate/text/v1`, `Idempotency-Key` per request.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startTestServer, type TestServer } from './helpers/server.ts';

let n = 0;
const idem = () => ({ headers: { 'Idempotency-Key': `sdk-${process.pid}-${++n}` } });

describe('text generation through the openai SDK', () => {
  let s: TestServer;
  let client: OpenAI;
  before(async () => {
    s = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '0' } });
    const u = await s.user({ llmAllowance: 100 });
    client = new OpenAI({ baseURL: `${s.url}/api/generate/text/v1`, apiKey: u.secret, maxRetries: 0 });
  });
  after(() => s.close());

  it('when the SDK creates a completion, then it parses a chat.completion with usage', async () => {
    const c = await client.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Hello SDK' }], max_tokens: 200 }, idem());
    assert.equal(c.object, 'chat.completion');
    assert.match(c.choices[0].message.content ?? '', /Hello SDK/);
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.ok(c.usage && c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens);
  });

  it('when the SDK streams, then the deltas join into the answer and the last chunk carries usage', async () => {
    const stream = await client.chat.completions.create(
      { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Stream SDK' }], stream: true, response_format: { type: 'json_object' } },
      idem(),
    );
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal((JSON.parse(text) as { restated: string }).restated, 'Stream SDK');
    assert.equal(finish, 'stop');
    assert.ok(usage && usage.completion_tokens > 0);
  });

  it('when the stream fails part-way, then the SDK iterator throws an APIError with the frame code', async () => {
    const stream = await client.chat.completions.create(
      { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Break [[scenario:stream-error]]' }], stream: true },
      idem(),
    );
    let chunks = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of stream) chunks++;
      })(),
      (e: unknown) => e instanceof OpenAI.APIError && (e as { code?: string }).code === 'PROVIDER_ERROR',
    );
    assert.ok(chunks > 0, 'some chunks arrived before the error');
  });

  it('when the SDK gets a 402, then it surfaces as an APIError with status and code and is not retried', async () => {
    const poor = await s.user({ llmAllowance: 0 });
    const c = new OpenAI({ baseURL: `${s.url}/api/generate/text/v1`, apiKey: poor.secret });
    await assert.rejects(
      c.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'x' }] }, idem()),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 402 && (e as { code?: string }).code === 'LLM_QUOTA_EXHAUSTED',
    );
  });

  it('when the SDK replays the same Idempotency-Key, then it gets the same completion', async () => {
    const options = idem();
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user' as const, content: 'Once' }] };
    const a = await client.chat.completions.create(body, options);
    const b = await client.chat.completions.create(body, options);
    assert.deepEqual(b, a);
  });
});
