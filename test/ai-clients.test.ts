/**
 * The AI client libraries people already use, against the real server:
 * the official `openai` SDK, the Vercel AI SDK (`ai` with
 * `@ai-sdk/openai` and `@ai-sdk/openai-compatible`) and LangChain
 * (`@langchain/openai`) each complete and stream with the configuration the
 * README documents, through `gemforgeFetch()` from @gemforge/client: one
 * Idempotency-Key per logical call, kept across the library's own retries.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { gemforgeFetch } from '../client/ai-fetch.ts';

const MODEL = 'gemforge-text-1';

/** A fetch that records each attempt's Idempotency-Key and answers the first `failures` attempts with a 503 itself. */
function recording(failures = 0) {
  const keys: string[] = [];
  const bodies: string[] = [];
  let failed = 0;
  const fetchFn: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    keys.push(headers.get('idempotency-key') ?? '(none)');
    bodies.push(typeof init?.body === 'string' ? init.body : '');
    if (failed < failures) {
      failed++;
      return new Response(JSON.stringify({ error: { code: 'TEMPORARILY_UNAVAILABLE', message: 'injected' } }), {
        status: 503,
        headers: { 'content-type': 'application/json' },
      });
    }
    return fetch(input, init);
  };
  return { fetchFn, keys, bodies };
}

describe('AI client libraries against the real server', () => {
  let s: TestServer;
  let apiKey: string;
  let accountId: string;
  let baseURL: string;
  before(async () => {
    s = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '0' } });
    ({ secret: apiKey, accountId } = await s.user({ llmAllowance: 100_000 }));
    baseURL = `${s.url}/api/generate/text/v1`;
  });
  after(() => s.close());

  const reservations = async () =>
    Number(((await s.db('reservations').where({ account_id: accountId }).count({ n: '*' })) as Array<{ n: number | string }>)[0]!.n);

  it('when the openai SDK completes and streams (with include_usage) through gemforgeFetch, then both work and a retried call keeps its key', async () => {
    const rec = recording(1);
    const openai = new OpenAI({ baseURL, apiKey, fetch: gemforgeFetch({ fetch: rec.fetchFn }), maxRetries: 2 });
    const before = await reservations();
    const done = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello from the openai SDK' }] });
    assert.match(done.choices[0]!.message.content ?? '', /Hello from the openai SDK/);
    assert.equal(rec.keys.length, 2, 'one injected 503, one retry');
    assert.equal(rec.keys[0], rec.keys[1], 'the retry kept the key');
    assert.equal((await reservations()) - before, 1, 'one logical call, one reservation');

    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Stream it' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.match(text, /Stream it/);
    assert.ok(usage && usage.completion_tokens > 0, 'usage arrives in the final chunk');
    assert.notEqual(rec.keys.at(-1), rec.keys[0], 'a new logical call has a new key');
  });

  it('when the Vercel AI SDK (@ai-sdk/openai, chat model) generates and streams, then both work', async () => {
    const rec = recording(1);
    const openai = createOpenAI({ baseURL, apiKey, fetch: gemforgeFetch({ fetch: rec.fetchFn }) });
    const result = await generateText({ model: openai.chat(MODEL), prompt: 'Hello from the AI SDK', maxRetries: 2 });
    assert.match(result.text, /Hello from the AI SDK/);
    assert.equal(rec.keys[0], rec.keys[1], 'the retry kept the key');
    assert.ok((result.usage.outputTokens ?? 0) > 0);

    const streamed = streamText({ model: openai.chat(MODEL), prompt: 'Stream from the AI SDK' });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    assert.match(text, /Stream from the AI SDK/);
    assert.ok(((await streamed.usage).outputTokens ?? 0) > 0, 'usage from the final chunk');
    assert.doesNotMatch(rec.bodies.at(-1)!, /stream_options/, 'stream_options was left out');
  });

  it('when the Vercel AI SDK (@ai-sdk/openai-compatible, includeUsage) generates and streams, then both work', async () => {
    const provider = createOpenAICompatible({ name: 'gemforge', baseURL, apiKey, fetch: gemforgeFetch(), includeUsage: true });
    const result = await generateText({ model: provider.chatModel(MODEL), prompt: 'Hello from openai-compatible' });
    assert.match(result.text, /Hello from openai-compatible/);
    const streamed = streamText({ model: provider.chatModel(MODEL), prompt: 'Stream from openai-compatible' });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    assert.match(text, /Stream from openai-compatible/);
    assert.ok(((await streamed.usage).outputTokens ?? 0) > 0);
  });

  it("when LangChain's ChatOpenAI invokes and streams (streamUsage on, its default), then both work", async () => {
    const rec = recording(1);
    const llm = new ChatOpenAI({ model: MODEL, apiKey, configuration: { baseURL, fetch: gemforgeFetch({ fetch: rec.fetchFn }) }, maxRetries: 2 });
    const answer = await llm.invoke('Hello from LangChain');
    assert.match(String(answer.content), /Hello from LangChain/);
    assert.equal(rec.keys[0], rec.keys[1], 'the retry kept the key');
    let text = '';
    for await (const chunk of await llm.stream('Stream from LangChain')) text += String(chunk.content);
    assert.match(text, /Stream from LangChain/);
  });

  it('when a library sends the same request again after a final answer (x-should-retry: false), then the wrapper answers it without the server', async () => {
    let calls = 0;
    const inner: typeof fetch = async () => {
      calls++;
      return new Response(JSON.stringify({ error: { code: 'PRICE_CHANGED', message: 'over maxGems' } }), {
        status: 409,
        headers: { 'content-type': 'application/json', 'x-should-retry': 'false' },
      });
    };
    const f = gemforgeFetch({ fetch: inner });
    const send = () =>
      f(`${baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","messages":[]}' });
    const first = await send();
    const again = await send();
    assert.equal(first.status, 409);
    assert.equal(again.status, 409);
    assert.equal(((await again.json()) as { error: { code: string } }).error.code, 'PRICE_CHANGED');
    assert.equal(calls, 1, 'the blind retry never reached the server');
  });

  it('when the caller sets an Idempotency-Key, then it is sent as set; two identical calls at once get two keys', async () => {
    const seen: string[] = [];
    const inner: typeof fetch = async (_input, init) => {
      seen.push(new Headers(init?.headers).get('idempotency-key')!);
      await new Promise((r) => setTimeout(r, 20));
      return new Response('{}', { status: 200 });
    };
    const f = gemforgeFetch({ fetch: inner });
    await f(`${baseURL}/chat/completions`, { method: 'POST', headers: { 'idempotency-key': 'mine-1' }, body: '{}' });
    assert.equal(seen[0], 'mine-1');
    await Promise.all([
      f(`${baseURL}/chat/completions`, { method: 'POST', body: '{"a":1}' }),
      f(`${baseURL}/chat/completions`, { method: 'POST', body: '{"a":1}' }),
    ]);
    assert.notEqual(seen[1], seen[2]);
  });
});
