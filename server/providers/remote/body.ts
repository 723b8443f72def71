/**
 * Reading what an upstream answers, bounded: a body is cut the moment it
 * passes its limit, while it is read, never after it was buffered whole (a
 * 300 MiB answer read with `response.json()` cost 1.4 GiB of memory before the
 * output limit was looked at). Every read runs under the signal of the request
 * that produced the body (the attempt's timeout, the deadline, the worker's
 * stop), so a body that never ends is cut too.
 */
import { Readable } from 'node:stream';
import { MediaGenerationError } from '../media-types.ts';

/** Error bodies are read only for a refusal's kind (content policy, credentials): their first 64 KiB say it. */
export const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** A body past its limit; `who` and the limit name it, safe to show. */
export class BodyTooLarge extends MediaGenerationError {
  constructor(who: string, maxBytes: number) {
    super('GENERATION_FAILED', `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`);
  }
}

/**
 * The JSON answer that carries an image in base64 (`b64_json`): base64 makes
 * 4 bytes of 3, and the answer's other fields (a revised prompt, usage) fit
 * in the slack.
 */
export function base64JsonLimit(maxOutputBytes: number): number {
  return Math.ceil((maxOutputBytes * 4) / 3) + 256 * 1024;
}

/** The body's chunks, as a Node stream of Buffers (fetch's web stream or our own). */
function chunksOf(body: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  return Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>);
}

/**
 * A response's body as bytes, at most `maxBytes`: a declared length over it is
 * refused before a byte is read, and the stream is cancelled as soon as it
 * passes it. Throws BodyTooLarge naming `shownLimit` (the output limit a
 * JSON answer's own limit derives from), so the slot fails, nothing charged.
 */
export async function readBounded(response: Response, maxBytes: number, who: string, shownLimit = maxBytes): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(who, shownLimit);
  }
  if (!response.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let seen = 0;
  const stream = chunksOf(response.body);
  for await (const chunk of stream) {
    seen += chunk.length;
    if (seen > maxBytes) {
      (stream as Readable).destroy();
      throw new BodyTooLarge(who, shownLimit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, seen);
}

/**
 * A JSON answer of at most `maxBytes`, parsed; undefined when it is not JSON.
 * Throws BodyTooLarge past the limit, and whatever cut the read (a timeout,
 * the worker's stop, a reset).
 */
export async function readJsonBounded(response: Response, maxBytes: number, who: string, shownLimit = maxBytes): Promise<unknown> {
  let text = (await readBounded(response, maxBytes, who, shownLimit)).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  } finally {
    text = ''; // the parsed value is all that is kept
  }
}

/**
 * The first `maxBytes` of an error body as text, for classifying a refusal;
 * the rest is not read. Never throws: a body that fails or is cut (the
 * attempt's timeout) reads as what arrived so far.
 */
export async function readErrorText(response: Response, maxBytes = ERROR_BODY_MAX_BYTES): Promise<string> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let seen = 0;
  const reader = response.body.getReader();
  try {
    while (seen < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      seen += value.length;
    }
  } catch {
    // cut by the attempt's signal or the connection: what arrived is enough
  } finally {
    reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8');
}
