/**
 * Strict SSE reading for tests: every event is parsed by eventsource-parser
 * (a WHATWG-conforming parser) and the raw bytes must be exactly the frames
 * the contract describes (`data: <json>\n\n` …), with no other fields.
 */
import assert from 'node:assert/strict';
import { createParser } from 'eventsource-parser';

export interface ChunkLike {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Array<{ index: number; delta: { role?: string; content?: string }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

export interface StreamResult {
  raw: string;
  /** The `data` of every event, in order. */
  data: string[];
  chunks: ChunkLike[];
  content: string;
  finishReason: string | null | undefined;
  usage: ChunkLike['usage'];
  error: { code?: string; message: string } | undefined;
  /** Whether the stream ended with `data: [DONE]`. */
  done: boolean;
}

/** Yields each event's data as it arrives (parsed by eventsource-parser), and checks the raw framing. */
export async function* sseEvents(res: Response, rawOut?: { raw: string }): AsyncGenerator<string> {
  assert.ok(res.body, 'a streamed body');
  const queue: string[] = [];
  const problems: string[] = [];
  const parser = createParser({
    onEvent: (e) => {
      if (e.event !== undefined || e.id !== undefined) problems.push(`unexpected event/id field: ${JSON.stringify(e)}`);
      queue.push(e.data);
    },
    onError: (err) => problems.push(`parse error: ${err.message}`),
    onRetry: () => problems.push('unexpected retry field'),
    onComment: (c) => problems.push(`unexpected comment: ${c}`),
  });
  const decoder = new TextDecoder();
  let raw = '';
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    const text = decoder.decode(bytes, { stream: true });
    raw += text;
    if (rawOut) rawOut.raw = raw;
    parser.feed(text);
    assert.deepEqual(problems, []);
    while (queue.length) yield queue.shift() as string;
  }
  assert.deepEqual(problems, []);
}

/** Reads a whole stream and summarises it; asserts the bytes are exactly `data: …\n\n` frames. */
export async function readStream(res: Response): Promise<StreamResult> {
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  const rawOut = { raw: '' };
  const data: string[] = [];
  for await (const d of sseEvents(res, rawOut)) data.push(d);
  const raw = rawOut.raw;
  assert.equal(raw, data.map((d) => `data: ${d}\n\n`).join(''), 'byte-for-byte: only `data: <payload>\\n\\n` frames');
  return summarise(raw, data);
}

export function summarise(raw: string, data: string[]): StreamResult {
  const result: StreamResult = { raw, data, chunks: [], content: '', finishReason: undefined, usage: undefined, error: undefined, done: false };
  data.forEach((d, i) => {
    assert.equal(result.done, false, 'nothing after [DONE]');
    assert.equal(result.error, undefined, 'nothing after an error frame');
    if (d === '[DONE]') {
      result.done = true;
      return;
    }
    const json = JSON.parse(d) as ChunkLike & { error?: { code?: string; message: string } };
    if (json.error) {
      assert.deepEqual(Object.keys(json), ['error']);
      result.error = json.error;
      return;
    }
    assert.equal(json.object, 'chat.completion.chunk');
    assert.equal(result.usage, undefined, `chunk ${i} after the usage chunk`);
    result.chunks.push(json);
    for (const c of json.choices) {
      result.content += c.delta.content ?? '';
      if (c.finish_reason) result.finishReason = c.finish_reason;
    }
    if (json.usage) result.usage = json.usage;
  });
  return result;
}
