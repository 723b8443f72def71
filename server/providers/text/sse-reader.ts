/**
 * A small Server-Sent Events reader for upstream streams: yields the `data` of
 * each event (multi-line data joined with `\n`), per the WHATWG rules that
 * matter here (LF, CRLF or CR line ends; comments and other fields ignored).
 */
export async function* sseData(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let pendingCR = false;
  const flushLine = function* (line: string): Generator<string> {
    if (line === '') {
      if (data.length) yield data.join('\n');
      data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer[i];
      if (c !== '\n' && c !== '\r') continue;
      if (c === '\n' && pendingCR && i === start) {
        // the LF of a CRLF whose CR ended the previous line
        pendingCR = false;
        start = i + 1;
        continue;
      }
      pendingCR = c === '\r';
      yield* flushLine(buffer.slice(start, i));
      start = i + 1;
    }
    buffer = buffer.slice(start);
  }
  buffer += decoder.decode();
  if (buffer) yield* flushLine(buffer);
  if (data.length) yield data.join('\n');
}
