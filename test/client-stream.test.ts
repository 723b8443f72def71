/**
 * The text stream iterator: a complete stream at the real server, an errored
 * one (`[[scenario:stream-error]]`, `[[scenario:uncertain]]`), and a truncated
 * one from a tiny local server that sends chunks and closes without [DONE].
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createGemforgeClient, type GemforgeClient } from '../client/client.ts';
import { StreamError } from '../client/errors.ts';
import type { ChatCompletionChunk } from '../client/chat.ts';

const ask = (content: string) => ({ model: 'gemforge-text-1', messages: [{ role: 'user' as const, content }], max_tokens: 300 });

const chunk = (content: string, extra: Partial<ChatCompletionChunk> = {}): ChatCompletionChunk => ({
  id: 'chatcmpl_local',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'gemforge-text-1',
  choices: [{ index: 0, delta: { content }, finish_reason: null }],
  ...extra,
});

/** A local server that answers every POST with these raw SSE bytes, written in pieces, then closes. */
async function rawSseServer(pieces: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    void (async () => {
      for (const piece of pieces) {
        res.write(piece);
        await new Promise((r) => setTimeout(r, 5));
      }
      res.end();
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('chat completion streams', () => {
  let s: TestServer;
  let gf: GemforgeClient;
  before(async () => {
    s = await startTestServer({ env: { TEXT_STREAM_DELAY_MS: '0' } });
    gf = createGemforgeClient({ baseUrl: s.url, apiKey: (await s.user({ llmAllowance: 10_000 })).secret });
  });
  after(() => s.close());

  it('when a stream completes, then the chunks join into the answer, the last one carries usage, and a replay of the key returns it again', async () => {
    const stream = await gf.chat.completions.stream(ask('Stream the client'));
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    assert.ok(chunks.length > 2);
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.match(text, /Stream the client/);
    assert.ok(chunks.at(-1)!.usage!.completion_tokens > 0);
    const replay = await (await gf.chat.completions.stream(ask('Stream the client'), { idempotencyKey: stream.idempotencyKey })).finalCompletion();
    assert.equal(replay.content, text);
    assert.equal(replay.finish_reason, 'stop');
  });

  it('when the stream carries an error frame, then the iterator yields the chunks so far and throws StreamError with the code and key', async () => {
    const stream = await gf.chat.completions.stream(ask('Break [[scenario:stream-error]]'));
    let seen = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of stream) seen++;
      })(),
      (e: unknown) => {
        assert.ok(e instanceof StreamError);
        assert.equal(e.code, 'PROVIDER_ERROR');
        assert.equal(e.idempotencyKey, stream.idempotencyKey);
        assert.equal(e.status, undefined, 'the HTTP status was 200; the stream itself failed');
        return true;
      },
    );
    assert.ok(seen > 0, 'chunks before the error frame were delivered');
    const uncertain = await gf.chat.completions.stream(ask('Lose me [[scenario:uncertain]]'));
    await assert.rejects(uncertain.finalCompletion(), (e: unknown) => e instanceof StreamError && e.code === 'REQUEST_UNCERTAIN' && /same key/.test(e.hint));
  });

  it('when a stream ends without [DONE], then the iterator throws STREAM_INCOMPLETE after the chunks it got', async () => {
    const frames = [chunk('Hel'), chunk('lo')].map((c) => `data: ${JSON.stringify(c)}\n\n`).join('');
    // Split mid-frame and mid-line so the reader must reassemble across reads.
    const local = await rawSseServer([frames.slice(0, 17), frames.slice(17, 60), frames.slice(60)]);
    try {
      const client = createGemforgeClient({ baseUrl: local.url, apiKey: 'gf_test' });
      const stream = await client.chat.completions.stream(ask('x'));
      const got: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const c of stream) got.push(c.choices[0].delta.content ?? '');
        })(),
        (e: unknown) => e instanceof StreamError && e.code === 'STREAM_INCOMPLETE' && e.idempotencyKey === stream.idempotencyKey,
      );
      assert.deepEqual(got, ['Hel', 'lo']);
    } finally {
      await local.close();
    }
  });

  it('when a local stream ends with [DONE] (CRLF line ends, comments), then it completes', async () => {
    const body = `: comment\r\ndata: ${JSON.stringify(chunk('Hi'))}\r\n\r\ndata: ${JSON.stringify(chunk('!', { usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }))}\r\n\r\ndata: [DONE]\r\n\r\n`;
    const local = await rawSseServer([body.slice(0, 5), body.slice(5)]);
    try {
      const client = createGemforgeClient({ baseUrl: local.url, apiKey: 'gf_test' });
      const done = await (await client.chat.completions.stream(ask('x'))).finalCompletion();
      assert.equal(done.content, 'Hi!');
      assert.equal(done.usage?.total_tokens, 3);
    } finally {
      await local.close();
    }
  });
});
