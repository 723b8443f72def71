/**
 * Reading what an upstream answers, bounded: a body is cut the moment it
 * passes its limit, while it is read, never after it was buffered whole (a
 * 300 MiB answer read with `response.json()` cost 1.4 GiB of memory before the
 * output limit was looked at). A base64 image in a JSON answer is decoded as
 * it arrives, into a file, so not even one copy of it is held in memory. Every read runs under the signal of the request
 * that produced the body (the attempt's timeout, the deadline, the worker's
 * stop), so a body that never ends is cut too.
 */
import fs from 'node:fs';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { MediaGenerationError } from '../media-types.ts';

/** Error bodies are read only for a refusal's kind (content policy, credentials): their first 64 KiB say it. */
export const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** A body past its limit; `who` and the limit name it, safe to show. */
export class BodyTooLarge extends MediaGenerationError {
  constructor(who: string, maxBytes: number) {
    super('GENERATION_FAILED', `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`);
  }
}

/** What a base64 answer may hold besides its base64 field (a revised prompt, usage). */
const ANSWER_REST_MAX_BYTES = 256 * 1024;

/** The largest JSON answer carrying `maxOutputBytes` in base64: 4 characters per 3 bytes, and the rest of the answer. */
function base64JsonLimit(maxOutputBytes: number): number {
  return Math.ceil((maxOutputBytes * 4) / 3) + ANSWER_REST_MAX_BYTES;
}

/**
 * Base64 text arriving in pieces, decoded into `write` four characters at a
 * time. JSON's escapes that base64 text may carry (`\/`, `\n`, `\r`) are
 * undone; a backslash at a piece's end waits for the next piece.
 */
function base64Decoder(write: (bytes: Buffer) => Promise<void>) {
  let carry = '';
  const clean = (text: string) =>
    text
      .replace(/\\\//g, '/')
      .replace(/\\[nrt]/g, '')
      .replace(/[^A-Za-z0-9+/=]/g, '');
  return {
    async push(piece: Buffer): Promise<void> {
      let text = carry + piece.toString('latin1');
      const open = text.endsWith('\\') ? '\\' : '';
      if (open) text = text.slice(0, -1);
      text = clean(text);
      const whole = text.length - (text.length % 4);
      carry = text.slice(whole) + open;
      if (whole > 0) await write(Buffer.from(text.slice(0, whole), 'base64'));
    },
    async end(): Promise<void> {
      const rest = clean(carry);
      carry = '';
      if (rest) await write(Buffer.from(rest, 'base64'));
    },
  };
}

/**
 * A JSON answer carrying one large base64 string (`field`, e.g. `b64_json`):
 * the string is decoded while it arrives, straight into `file`, at most
 * `maxBytes` decoded bytes, and never held as text; the rest of the answer
 * (at most 256 KiB) is parsed with the field left as "". Returns the parsed
 * answer (undefined when it is not JSON) and the bytes written (0: no such
 * field, e.g. a `url` answer). Throws BodyTooLarge past either limit.
 */
export async function readBase64Field(
  response: Response,
  field: string,
  file: string,
  maxBytes: number,
  who: string,
): Promise<{ answer: unknown; bytes: number }> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > base64JsonLimit(maxBytes)) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(who, maxBytes);
  }
  const out = fs.createWriteStream(file);
  let written = 0;
  const decoder = base64Decoder(async (bytes) => {
    written += bytes.length;
    if (written > maxBytes) throw new BodyTooLarge(who, maxBytes);
    if (!out.write(bytes)) await once(out, 'drain');
  });
  // The opening quote of the field's value, not inside another string (there it would follow a backslash).
  const marker = new RegExp(`(?<!\\\\)"${field}"\\s*:\\s*"`);
  const rest: Buffer[] = [];
  let restBytes = 0;
  const keep = (bytes: Buffer) => {
    restBytes += bytes.length;
    if (restBytes > ANSWER_REST_MAX_BYTES) throw new BodyTooLarge(who, maxBytes);
    rest.push(bytes);
  };
  let head: Buffer = Buffer.alloc(0);
  let state: 'head' | 'value' | 'tail' = 'head';
  try {
    for await (const chunk of response.body ? chunksOf(response.body) : []) {
      let data: Buffer = Buffer.from(chunk);
      if (state === 'head') {
        head = Buffer.concat([head, data]);
        const found = marker.exec(head.toString('latin1'));
        if (!found) {
          if (head.length > ANSWER_REST_MAX_BYTES) throw new BodyTooLarge(who, maxBytes);
          continue;
        }
        const at = found.index + found[0].length;
        keep(head.subarray(0, at));
        data = head.subarray(at);
        head = Buffer.alloc(0);
        state = 'value';
      }
      if (state === 'value') {
        const end = data.indexOf(0x22); // the closing quote: base64 has none
        await decoder.push(end === -1 ? data : data.subarray(0, end));
        if (end === -1) continue;
        await decoder.end();
        data = data.subarray(end);
        state = 'tail';
      }
      keep(data);
    }
    if (state === 'head') keep(head);
  } finally {
    out.end();
    await finished(out).catch(() => undefined);
  }
  try {
    return { answer: JSON.parse(Buffer.concat(rest).toString('utf8')), bytes: state === 'head' ? 0 : written };
  } catch {
    return { answer: undefined, bytes: 0 };
  }
}

/** The body's chunks, as a Node stream of Buffers (fetch's web stream or our own). */
function chunksOf(body: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  return Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>);
}

/**
 * A response's body as bytes, at most `maxBytes`: a declared length over it is
 * refused before a byte is read, and the stream is cancelled as soon as it
 * passes it. Throws BodyTooLarge (the slot fails, nothing charged).
 */
export async function readBounded(response: Response, maxBytes: number, who: string): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(who, maxBytes);
  }
  if (!response.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let seen = 0;
  const stream = chunksOf(response.body);
  for await (const chunk of stream) {
    seen += chunk.length;
    if (seen > maxBytes) {
      (stream as Readable).destroy();
      throw new BodyTooLarge(who, maxBytes);
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
export async function readJsonBounded(response: Response, maxBytes: number, who: string): Promise<unknown> {
  let text = (await readBounded(response, maxBytes, who)).toString('utf8');
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
