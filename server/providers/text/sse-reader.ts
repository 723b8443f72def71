/**
 * A small Server-Sent Events reader for upstream streams: yields the `data` of
 * each event (multi-line data joined with `\n`), per the WHATWG rules that
 * matter here (LF, CRLF or CR line ends; comments and other fields ignored).
 *
 * Linear in its input: each chunk is scanned once, and a line that spans
 * chunks is kept as pieces joined once at its end (rescanning a growing
 * buffer made a 16 MiB line without a newline cost 21 s of CPU). One event
 * (its lines, pending ones included) may hold at most `maxEventBytes`
 * characters: past that the stream fails with SseEventTooLarge, the way a
 * stream that broke off does.
 */

/** Default bound of one event: far above any chat-completion chunk. */
export const SSE_EVENT_MAX_BYTES = 1024 * 1024;

export class SseEventTooLarge extends Error {
  constructor(maxBytes: number) {
    super(`an upstream event is larger than ${maxBytes} bytes`);
    this.name = 'SseEventTooLarge';
  }
}

export async function* sseData(body: AsyncIterable<Uint8Array>, maxEventBytes = SSE_EVENT_MAX_BYTES): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pieces: string[] = []; // the current line, as it arrived
  let lineLength = 0;
  let data: string[] = [];
  let eventLength = 0; // data kept for the current event
  let pendingCR = false;
  const grow = (length: number) => {
    if (eventLength + length > maxEventBytes) throw new SseEventTooLarge(maxEventBytes);
  };
  const flushLine = function* (line: string): Generator<string> {
    if (line === '') {
      if (data.length) yield data.join('\n');
      data = [];
      eventLength = 0;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      data.push(value);
      eventLength += value.length + 1;
    }
  };
  const scan = function* (text: string): Generator<string> {
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      if (c === 10 && pendingCR && i === start && lineLength === 0) {
        // the LF of a CRLF whose CR ended the previous line
        pendingCR = false;
        start = i + 1;
        continue;
      }
      pendingCR = c === 13;
      grow(lineLength + i - start);
      pieces.push(text.slice(start, i));
      const line = pieces.length === 1 ? pieces[0]! : pieces.join('');
      pieces = [];
      lineLength = 0;
      yield* flushLine(line);
      start = i + 1;
    }
    if (start < text.length) {
      lineLength += text.length - start;
      grow(lineLength);
      pieces.push(text.slice(start));
    }
  };
  for await (const chunk of body) yield* scan(decoder.decode(chunk, { stream: true }));
  yield* scan(decoder.decode());
  if (lineLength > 0) {
    const line = pieces.join('');
    pieces = [];
    yield* flushLine(line);
  }
  if (data.length) yield data.join('\n');
}
