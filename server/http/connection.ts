/**
 * When an answer closes its connection. Node keeps a connection alive after a
 * response unless told otherwise, and an error answered before the request's
 * body was read (a full disk mid-upload, a refused submission) leaves the rest
 * of that body unread on the socket: the next request on it is never parsed,
 * so the client waits forever. Such an answer says `Connection: close` and
 * Node closes the socket after it. While the server drains, every answer
 * closes its connection too, including those of requests already in flight.
 */
import type http from 'node:http';

/** True when the request announced a body that has not been read to its end. */
function bodyUnread(req: http.IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Makes every answer of `server` close its connection when its body was left unread or the server drains. */
export function closeWhenUnread(server: http.Server, lifecycle: { draining: boolean }): void {
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const writeHead = res.writeHead;
    // The decision is made when the headers go out: by then the handler read what it was going to read.
    res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
      if ((lifecycle.draining || bodyUnread(req)) && !this.headersSent) this.setHeader('connection', 'close');
      return writeHead.apply(this, args);
    } as typeof writeHead;
  });
}
