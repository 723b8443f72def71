/**
 * The front door of `npm run dev`: it listens on HOST:PORT and passes each request
 * to the server that is live now, so a restart swaps servers without a moment where
 * nothing answers. The next server starts on a port of its own beside the running
 * one; `switchTo` sends every request that arrives from then on to it (requests in
 * flight finish on the old one, which then drains and stops).
 *
 * The client's address goes on in `X-Forwarded-For` (the dev servers trust loopback),
 * and the `Host` header is passed unchanged, so signed links and network policies
 * see the person, not the proxy.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError } from '../server/http/api-error.ts';

export interface DevProxy {
  /** From now on, requests go to the server on this port (undefined: none runs, answer 503). */
  switchTo(port: number | undefined): void;
  readonly port: number;
  close(): Promise<void>;
}

const NOT_RUNNING = new ApiError(
  503,
  'TEMPORARILY_UNAVAILABLE',
  'npm run dev has no server running (see its output: the contract or the server does not start); retry once it does.',
);

function unavailable(res: http.ServerResponse, error: ApiError): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(error.status, { 'content-type': 'application/json' }).end(JSON.stringify(error.toEnvelope()));
}

/** Listens on host:port and forwards to the live server; resolves once listening. */
export async function startDevProxy(host: string, port: number): Promise<DevProxy> {
  let target: number | undefined;
  // Keep-alive to each server: a request does not pay a new connection, and a restart's old agent drains with it.
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const to = target;
    if (to === undefined) return unavailable(res, NOT_RUNNING);
    const forwarded = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
    const upstream = http.request(
      { host: '127.0.0.1', port: to, method: req.method, path: req.url, headers: { ...req.headers, 'x-forwarded-for': forwarded }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => unavailable(res, NOT_RUNNING));
    // A client that goes away mid-request (a closed stream) stops the server's work too.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  // As the server itself: longer than common client idle timeouts.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    switchTo: (next) => void (target = next),
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        agent.destroy();
        server.close(() => resolve());
      }),
  };
}
