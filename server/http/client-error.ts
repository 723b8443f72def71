/**
 * Failures Node's HTTP parser answers before Express sees a request: a header
 * block or URL over the limit (Node's bare 431), malformed HTTP (a NUL/CR/LF in
 * a header value, an invalid header name, both Content-Length and
 * Transfer-Encoding, a bad chunk size: Node's bare 400), a client too slow to
 * send its headers or body (bare 408), and an `Expect` the server cannot meet
 * (bare 417). Each leaves with the spec's Error envelope and a status from the
 * spec's set: 413 for what is too large, 400 for the rest. When the socket can
 * no longer carry a response (reset, or a response already under way on it), it
 * is only closed.
 */
import crypto from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger.ts';

/** What the parser's error code means for the client, as status and message. */
function describe(code: string | undefined): { status: 400 | 413; message: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 413, message: 'The request line or headers are too large.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 400, message: 'The request was not received in time.' };
    case 'HPE_INVALID_HEADER_TOKEN':
      return { status: 400, message: 'A header name or value contains characters HTTP does not allow.' };
    case 'HPE_INVALID_CHUNK_SIZE':
      return { status: 400, message: 'The chunked request body is malformed.' };
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CONTENT_LENGTH':
      return { status: 400, message: 'The request body framing is invalid (Content-Length and Transfer-Encoding).' };
    default:
      return { status: 400, message: 'The request is not valid HTTP.' };
  }
}

const REASONS = { 400: 'Bad Request', 413: 'Payload Too Large' } as const;

function envelope(message: string): string {
  return JSON.stringify({ error: { code: 'INVALID_REQUEST', message } });
}

const newRequestId = () => `req_${crypto.randomUUID().replaceAll('-', '')}`;

/** The raw response for a parser failure (the socket is then closed). */
export function clientErrorResponse(code: string | undefined, requestId = newRequestId()): string {
  const { status, message } = describe(code);
  const body = envelope(message);
  return (
    `HTTP/1.1 ${status} ${REASONS[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `x-request-id: ${requestId}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/** Installs the `clientError` and `checkExpectation` handlers on a node:http server. */
export function answerClientErrors(server: http.Server, logger?: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A client that hung up (reset, or closed its side mid-body) gets no answer. The
    // socket is destroyed with the error, as Node's default does: a request already
    // under way (a multipart upload) sees it and cleans up its temp files.
    if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE' || !socket.writable) {
      socket.destroy(err);
      return;
    }
    logger?.debug({ code: err.code }, 'malformed or incomplete request answered by the client-error handler');
    // A body that breaks mid-way (a bad chunk size): the request already reached the app.
    const pending = (socket as Duplex & { _httpMessage?: http.ServerResponse })._httpMessage;
    if (pending) {
      if (pending.headersSent) socket.destroy(err);
      else answerWith(pending, describe(err.code), err);
      return;
    }
    // Never reached the app, so no access-log line: this one carries the id the client sees.
    const requestId = newRequestId();
    logger?.info({ requestId, status: describe(err.code).status, code: err.code }, 'request refused before parsing');
    socket.end(clientErrorResponse(err.code, requestId));
  });
  // Node answers an unknown Expect with a bare 417 (not in the spec's set); 100-continue is unaffected.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const requestId = newRequestId();
    res.setHeader('x-request-id', requestId);
    logger?.info(
      { requestId, status: 400, method: req.method, expect: String(req.headers.expect).slice(0, 100) },
      'request refused before the app: unsupported Expect',
    );
    answerWith(res, { status: 400, message: `Unsupported Expect header "${String(req.headers.expect).slice(0, 100)}"; only 100-continue is supported.` });
  });
}

/** Ends `res` with the envelope and closes the connection (what follows on it cannot be trusted). */
function answerWith(res: http.ServerResponse, { status, message }: { status: 400 | 413; message: string }, cause?: Error): void {
  const body = envelope(message);
  const requestId = res.getHeader('x-request-id') ?? newRequestId();
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-request-id': requestId,
    connection: 'close',
  });
  // Then the request itself fails with the cause, so whoever reads its body (multer
  // writing an upload to a temp file) stops and cleans up, as on a dropped connection.
  res.end(body, () => (cause ? res.req.destroy(cause) : res.socket?.destroy()));
}
