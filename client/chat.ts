/**
 * The text stream as an async iterator of `chat.completion.chunk` objects.
 * "HTTP 200 alone does not prove success": the iterator throws a StreamError
 * when the stream carries an error frame (its code, e.g. `REQUEST_UNCERTAIN`)
 * or ends without `data: [DONE]` (`STREAM_INCOMPLETE`); the error carries the
 * Idempotency-Key, to replay the same identity later. Browser-safe: a small SSE
 * reader over a WHATWG ReadableStream, no dependencies.
 */
import type { components } from './generated/api.ts';
import { StreamError } from './errors.ts';

export type ChatCompletionChunk = components['schemas']['ChatCompletionChunk'];
export type ChatCompletionUsage = components['schemas']['ChatCompletionUsage'];

/** What a whole successful stream adds up to. */
export interface StreamedCompletion {
  id: string;
  model: string;
  content: string;
  finish_reason: ChatCompletionChunk['choices'][number]['finish_reason'];
  usage: ChatCompletionUsage | undefined;
}

/** Splits SSE bytes into the `data` of each event (fields other than `data` are ignored). */
export async function* sseData(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // Complete lines only; a trailing partial line waits for more bytes, and so does a
      // trailing CR (its LF may be in the next read: CRLF must not count as two line ends).
      const held = !done && buffer.endsWith('\r') ? '\r' : '';
      const lines = (held ? buffer.slice(0, -1) : buffer).split(/\r\n|\r|\n/);
      buffer = done ? '' : (lines.pop() ?? '') + held;
      for (const line of lines) {
        if (line === '') {
          if (data.length) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
        }
      }
      // An event not closed by a blank line before the end is incomplete: dropped (WHATWG rule).
      if (done) return;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await reader.cancel().catch(() => {});
  }
}

/**
 * A streamed chat completion. Iterate it once with `for await`; or call
 * `finalCompletion()` to read it all.
 */
export class ChatStream implements AsyncIterable<ChatCompletionChunk> {
  private used = false;

  constructor(
    private readonly body: ReadableStream<Uint8Array>,
    /** The identity of this request: replay with it (same body) when the stream is incomplete. */
    readonly idempotencyKey: string,
    readonly requestId: string | undefined,
    private readonly signal?: AbortSignal,
  ) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<ChatCompletionChunk, void, undefined> {
    if (this.used) throw new TypeError('A ChatStream can be iterated only once.');
    this.used = true;
    const meta = { idempotencyKey: this.idempotencyKey, requestId: this.requestId };
    try {
      for await (const data of sseData(this.body, this.signal)) {
        if (data === '[DONE]') return;
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch (cause) {
          throw new StreamError({ ...meta, code: 'STREAM_INCOMPLETE', message: 'The stream carried a frame that is not JSON.', cause });
        }
        const error = (parsed as { error?: { code?: string; message?: string } }).error;
        if (error && typeof error === 'object') {
          throw new StreamError({ ...meta, code: error.code, message: error.message ?? 'The stream carried an error.' });
        }
        yield parsed as ChatCompletionChunk;
      }
    } catch (cause) {
      if (cause instanceof StreamError || this.signal?.aborted) throw cause;
      throw new StreamError({ ...meta, code: 'STREAM_INCOMPLETE', message: `The stream broke off: ${(cause as Error)?.message ?? cause}`, cause });
    }
    throw new StreamError({ ...meta, code: 'STREAM_INCOMPLETE', message: 'The stream ended without data: [DONE]; the answer is incomplete.' });
  }

  /** Reads the whole stream (throws like the iterator) and joins the deltas. */
  async finalCompletion(onDelta?: (text: string) => void): Promise<StreamedCompletion> {
    const out: StreamedCompletion = { id: '', model: '', content: '', finish_reason: null, usage: undefined };
    for await (const chunk of this) {
      out.id = chunk.id;
      out.model = chunk.model;
      for (const choice of chunk.choices) {
        if (choice.delta.content) {
          out.content += choice.delta.content;
          onDelta?.(choice.delta.content);
        }
        if (choice.finish_reason) out.finish_reason = choice.finish_reason;
      }
      if (chunk.usage) out.usage = chunk.usage;
    }
    return out;
  }
}
