/**
 * Connections under outages and drains, on one kept-alive socket each: an
 * error answered before the request's body was read (a full disk mid-upload)
 * closes its connection instead of wedging it; while a shutdown drains, an
 * answer to a request already in flight says `Connection: close`, and idle
 * kept-alive connections are closed at once while the listener still answers.
 * A full disk cannot be made for real in a test: the blob store's
 * fault-injection seam (`diskFaults`) answers ENOSPC.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { parseRaw, type RawResponse } from './helpers/raw-http.ts';
import { until } from './helpers/poll.ts';
import { diskFaults } from '../server/storage/blobs.ts';

/** One kept-alive TCP connection: what came back so far, and whether the server closed it. */
async function connect(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let received = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  socket.on('close', () => (closed = true));
  socket.on('error', () => (closed = true));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return {
    write: (chunk: string | Buffer) => socket.write(chunk),
    closed: () => closed,
    /** The first complete response head (body as far as it came). */
    response: () => until<RawResponse>('a response', () => parseRaw(received)),
    destroy: () => socket.destroy(),
  };
}

const PNG_HEAD = Buffer.from('89504e470d0a1a0a', 'hex');

function uploadHead(key: string, length: number): string {
  return `POST /api/generate/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: image/png\r\nContent-Length: ${length}\r\nConnection: keep-alive\r\n\r\n`;
}

describe('outages: connections whose answers cannot keep them', () => {
  let s: TestServer | undefined;
  afterEach(async () => {
    diskFaults.write = undefined;
    await s?.close();
    s = undefined;
  });

  it('when an upload fails mid-body on a full disk, then the 503 closes the connection instead of leaving the socket wedged', async () => {
    s = await startTestServer();
    const u = await s.user();
    diskFaults.write = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const c = await connect(s.url);
    try {
      c.write(uploadHead(u.secret, 1_000_000));
      c.write(Buffer.concat([PNG_HEAD, Buffer.alloc(64 * 1024)]));
      const answer = await c.response();
      assert.equal(answer.status, 503);
      assert.equal(answer.headers.connection, 'close');
      await until('the server to close the connection', () => c.closed(), 5000);
    } finally {
      c.destroy();
    }
    // The server itself still answers on a new connection.
    assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
  });

  it('when a shutdown drains, then a request already in flight is answered with Connection: close', async () => {
    s = await startTestServer();
    const u = await s.user();
    const c = await connect(s.url);
    try {
      const body = Buffer.concat([PNG_HEAD, Buffer.alloc(1024)]);
      c.write(uploadHead(u.secret, body.length));
      c.write(body.subarray(0, 10));
      // In flight: the handler is receiving the body (its temp file exists), long past the drain middleware.
      await until('the upload to be received', () => fs.existsSync(path.join(s!.dataDir, 'tmp')) && fs.readdirSync(path.join(s!.dataDir, 'tmp')).length > 0);
      const closing = s.close({ readinessDelayMs: 1000, graceMs: 5000 });
      c.write(body.subarray(10));
      const answer = await c.response();
      assert.equal(answer.headers.connection, 'close', `answer ${answer.status} keeps its connection`);
      await closing;
    } finally {
      c.destroy();
      s = undefined;
    }
  });

  it('when a shutdown drains, then idle kept-alive connections are closed at once while the listener still answers', async () => {
    s = await startTestServer();
    const c = await connect(s.url);
    try {
      c.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
      assert.equal((await c.response()).headers.connection, 'keep-alive');
      const closing = s.close({ readinessDelayMs: 3000 });
      await until('the idle connection to be closed', () => c.closed(), 10_000);
      const ready = await fetch(`${s.url}/readyz`);
      assert.equal(ready.status, 503, 'the listener still answers, not ready');
      await closing;
    } finally {
      c.destroy();
      s = undefined;
    }
  });
});
