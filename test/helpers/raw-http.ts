/**
 * Raw HTTP over a TCP socket, for requests fetch refuses to send (malformed
 * headers, conflicting framing, oversized header blocks, half-sent requests).
 */
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server wrote before closing (empty when it only closed). */
  raw: string;
}

/** Parses one HTTP/1.1 response (status line, headers, body as text); undefined for no bytes. */
export function parseRaw(raw: string): RawResponse | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4), raw };
}

/**
 * Writes `chunks` to `url`'s host and port (each after the previous one was
 * written, `pauseMs` apart) and resolves with what came back once the server
 * closes the connection or `timeoutMs` passes.
 */
export async function rawRequest(
  url: string,
  chunks: Array<string | Buffer>,
  options: { pauseMs?: number; timeoutMs?: number } = {},
): Promise<RawResponse | undefined> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const closed = new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  for (const chunk of chunks) {
    if (socket.destroyed) break;
    socket.write(chunk);
    if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeoutMs ?? 5000)))]);
  clearTimeout(timer);
  socket.destroy();
  return parseRaw(received);
}
