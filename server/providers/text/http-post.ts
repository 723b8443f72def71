/**
 * One POST to an upstream over `node:http`/`node:https`, on a keep-alive agent
 * of the caller's. The text gateway used `fetch` here: on Node 20 its WHATWG
 * streams, promise chains and abort signals cost about a tenth of the server's
 * CPU per forwarded completion (and a `DOMException` each time a body was
 * cancelled at `[DONE]`); a plain request and its `IncomingMessage` read as a
 * Node stream do the same work for a fraction of that.
 *
 * The whole exchange, body included, runs under one timer: past `timeoutMs`
 * the request is destroyed with an `UpstreamTimeout`, and a body being read
 * fails with it. Network failures keep their `code` (ECONNREFUSED …). The
 * answer is the `IncomingMessage`; `finish` ends it without killing the
 * connection (the rest is read and dropped, so the socket goes back to the
 * agent), `asResponse` wraps it as a fetch `Response` for the rare paths that
 * read bodies with the bounded readers of remote/body.ts.
 */
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';

export class UpstreamTimeout extends Error {
  constructor(ms: number) {
    super(`no complete answer within ${ms} ms`);
    this.name = 'UpstreamTimeout';
  }
}

export interface Posted {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: http.IncomingMessage;
  /** Stops reading what is left (dropped, the connection kept) and the timer. */
  finish(): void;
}

/** A keep-alive agent for `url`'s scheme (one per provider, so its sockets are reused). */
export function agentFor(url: string): http.Agent {
  return url.startsWith('https:') ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
}

/** POSTs `body` to `url`; resolves once the answer's head arrived. */
export function postOnce(url: string, headers: Record<string, string>, body: string, agent: http.Agent, timeoutMs: number): Promise<Posted> {
  const send = url.startsWith('https:') ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(url, { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } });
    const timer = setTimeout(() => req.destroy(new UpstreamTimeout(timeoutMs)), timeoutMs);
    req.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.once('response', (res) => {
      res.once('close', () => clearTimeout(timer));
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: res,
        finish() {
          clearTimeout(timer);
          if (!res.readableEnded) res.resume();
        },
      });
    });
    req.end(body);
  });
}

/** The answer as a fetch `Response` (status 200–599), for readers written for one. */
export function asResponse(posted: Posted): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(posted.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return new Response(Readable.toWeb(posted.body) as ReadableStream<Uint8Array>, { status: posted.status, headers });
}
