/**
 * Bad input that Node's HTTP layer or the validator used to answer outside the
 * spec: every one leaves with the Error envelope
 * and a status from the spec's set, never a 503 and never a bare Node answer.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { rawRequest, type RawResponse } from './helpers/raw-http.ts';
import { until } from './helpers/poll.ts';
import { answerClientErrors } from '../server/http/client-error.ts';
import pino from 'pino';

/** The response is the envelope with INVALID_REQUEST and `status`. */
function assertEnvelope(res: RawResponse | undefined, status: number, what: string): void {
  assert.ok(res, `${what}: the server answered`);
  assert.equal(res.status, status, `${what}: ${res.raw.slice(0, 200)}`);
  assert.match(res.headers['content-type'] ?? '', /^application\/json/, what);
  const body = JSON.parse(res.body) as { error: { code?: string; message: string } };
  assert.deepEqual(Object.keys(body), ['error'], what);
  assert.equal(body.error.code, 'INVALID_REQUEST', what);
  assert.equal(typeof body.error.message, 'string', what);
}

describe('hardening: bad input at the HTTP layer', () => {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startTestServer();
    key = (await s.user()).secret;
  });
  after(() => s.close());

  for (const page of ['1e400', 'Infinity', '1e309', '-1e400', '-Infinity']) {
    it(`when the voice list asks for page=${page}, then it is 422 INVALID_REQUEST, not 503`, async () => {
      const res = await s.call('GET', `/api/generate/voices?page=${encodeURIComponent(page)}`, { key });
      const err = await errorOf(res);
      assert.equal(err.status, 422);
      assert.equal(err.code, 'INVALID_REQUEST');
      assert.match(err.message, /query\.page/);
    });
  }

  it('when a JSON body carries 1e400 (Infinity once parsed), then it is a 4xx, not 503', async () => {
    const body = '{"model":"gemforge-image-1","prompt":"a red fox","parameters":{"resolution":"512"},"maxGems":1e400}';
    const res = await s.call('POST', '/api/generate/image', { key, body, headers: { 'idempotency-key': 'inf-body-1' } });
    const err = await errorOf(res);
    assert.equal(err.status, 422);
  });

  it('when a task ID, a query value or a body string carries NUL (U+0000, which Postgres cannot store), then it is 404 or 422, not 503', async () => {
    for (const method of ['GET', 'HEAD']) assert.equal((await s.call(method, '/api/generate/tasks/%00', { key })).status, 404, method);
    assert.equal((await errorOf(await s.call('GET', '/api/generate/tasks/task_a%00b', { key }))).code, 'NOT_FOUND');
    assert.equal((await errorOf(await s.call('GET', '/api/generate/voices?language=en%00', { key }))).status, 422);
    const body = { model: 'gemforge-image-1', prompt: 'a fox', parameters: { resolution: '512' }, referenceAssetIds: ['asset_\u0000'] };
    const res = await errorOf(await s.call('POST', '/api/generate/image', { key, body, headers: { 'idempotency-key': 'nul-body-1' } }));
    assert.equal(res.status, 422);
    assert.match(res.message, /body\.referenceAssetIds\[0\].*NUL/);
  });

  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
    it(`when /docs/assets/${name} is asked for, then it is 404 NOT_FOUND`, async () => {
      const err = await errorOf(await fetch(`${s.url}/docs/assets/${name}`));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'NOT_FOUND');
    });
  }

  for (const path of ['/files/%E0%A4%A?expires=1&sig=a', '/docs/assets/%E0%A4%A', '/api/generate/tasks/%E0%A4%A', '/api/generate/tasks/%']) {
    it(`when the path ${path} is not valid percent-encoding, then it is 404 NOT_FOUND, not 503`, async () => {
      const err = await errorOf(await s.call('GET', path, { key }));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'NOT_FOUND');
    });
  }

  it('when a header block of 64 KB arrives, then it is 413 with the envelope, not a bare 431', async () => {
    const res = await rawRequest(s.url, [`GET /api/generate/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`]);
    assertEnvelope(res, 413, '64 KB header');
  });

  it('when the URL is 16 KB long, then it is 413 with the envelope, not a bare 431', async () => {
    const res = await rawRequest(s.url, [`GET /api/generate/models?q=${'a'.repeat(16 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`]);
    assertEnvelope(res, 413, '16 KB URL');
  });

  it('when Expect is not 100-continue, then it is 400 with the envelope, not a bare 417', async () => {
    const res = await rawRequest(s.url, ['GET /api/generate/models HTTP/1.1\r\nHost: x\r\nExpect: 999-nope\r\nConnection: close\r\n\r\n']);
    assertEnvelope(res, 400, 'Expect');
  });

  const malformed: Array<[string, string]> = [
    ['a NUL in a header value', 'GET /api/generate/models HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'],
    ['a bare CR in a header value', 'GET /api/generate/models HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n'],
    ['an invalid header name', 'GET /api/generate/models HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n'],
    [
      'both Content-Length and Transfer-Encoding',
      'POST /api/generate/image HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    [
      'a bad chunk size',
      'POST /api/generate/image HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ],
    ['a request line that is not HTTP', 'HELLO\r\n\r\n'],
  ];
  for (const [what, raw] of malformed) {
    it(`when a request has ${what}, then it is 400 with the envelope, not Node's bare 400`, async () => {
      assertEnvelope(await rawRequest(s.url, [raw]), 400, what);
    });
  }

  it('when a voice upload breaks mid-body with a bad chunk size, then it is 400 with the envelope and no temp file is left', async () => {
    const boundary = 'xHardeningBoundary';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n${'R'.repeat(4000)}`;
    const raw = [
      `POST /api/generate/voices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      `${Buffer.byteLength(head).toString(16)}\r\n${head}\r\n`,
      'zz\r\nmore\r\n0\r\n\r\n',
    ];
    assertEnvelope(await rawRequest(s.url, raw, { pauseMs: 100 }), 400, 'bad chunk in an upload');
    const dir = path.join(s.dataDir, 'tmp', 'multipart');
    const left = () => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);
    await until('the temp files to be removed', () => left().length === 0, 5000, 20);
  });

  it('when the server is still healthy after all that, then a normal request succeeds', async () => {
    const res = await s.call('GET', '/api/generate/models', { key });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  });
});

describe('hardening: slow clients', () => {
  it('when a client sends its headers too slowly, then it gets 400 with the envelope, not a bare 408', async () => {
    // The server's own timeouts are a minute; the same handler on a server with short ones.
    const server = http.createServer({ headersTimeout: 300, requestTimeout: 600, connectionsCheckingInterval: 50 }, (_req, res) => res.end('ok'));
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const res = await rawRequest(url, ['GET / HTTP/1.1\r\n', 'Host: x\r\n'], { pauseMs: 100, timeoutMs: 5000 });
      assertEnvelope(res, 400, 'slow headers');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('hardening: requests refused before the app', () => {
  it('when Node refuses a malformed request or an unknown Expect, then the x-request-id it answers with is in the log', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const server = http.createServer((_req, res) => res.end('ok'));
    answerClientErrors(server, logger);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const raw of ['GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n', 'GET / HTTP/1.1\r\nHost: x\r\nExpect: 999-nope\r\nConnection: close\r\n\r\n']) {
        const res = await rawRequest(url, [raw]);
        assertEnvelope(res, 400, raw);
        const id = res!.headers['x-request-id'];
        assert.match(id ?? '', /^req_[0-9a-f]{32}$/);
        assert.ok(
          lines.some((l) => l.requestId === id && l.status === 400),
          `a log line carries ${id}`,
        );
      }
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
