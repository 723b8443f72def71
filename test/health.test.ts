/**
 * /healthz and /readyz: outside the public contract, no key;
 * readiness fails when the blob store is unusable and while a shutdown drains,
 * and a draining server closes each connection after its answer.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startTestServer } from './helpers/server.ts';

/** A GET on a kept-alive connection of `agent`. */
function get(agent: http.Agent, url: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
      })
      .on('error', reject);
  });
}

describe('health and readiness', () => {
  it('when the server runs, then /healthz answers ok and /readyz ready, without a key', async () => {
    const s = await startTestServer();
    try {
      const health = await fetch(`${s.url}/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: 'ok' });
      const ready = await fetch(`${s.url}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready', checks: { database: 'ok', storage: 'ok', draining: false } });
    } finally {
      await s.close();
    }
  });

  it('when the blob store is not a usable directory, then /readyz answers 503 naming the check', async () => {
    const s = await startTestServer();
    const blobs = path.join(s.dataDir, 'blobs');
    try {
      fs.rmSync(blobs, { recursive: true, force: true });
      fs.writeFileSync(blobs, 'not a directory');
      const ready = await fetch(`${s.url}/readyz`);
      assert.equal(ready.status, 503);
      const body = (await ready.json()) as { status: string; checks: { storage: string } };
      assert.equal(body.status, 'not-ready');
      assert.match(body.checks.storage, /^failed:/);
      assert.doesNotMatch(body.checks.storage, /blobs|ENOTDIR|EEXIST|\//, 'no path or error text to an unauthenticated caller');
    } finally {
      fs.rmSync(blobs, { force: true });
      await s.close();
    }
  });

  it('when a shutdown drains with a readiness delay, then /readyz answers 503 meanwhile and each answer closes its connection', async () => {
    const s = await startTestServer();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await get(agent, `${s.url}/healthz`)).headers.connection, 'keep-alive');
      const closing = s.close({ readinessDelayMs: 1500 }); // draining from this call on
      const ready = await get(agent, `${s.url}/readyz`);
      assert.equal(ready.status, 503);
      assert.deepEqual(ready.body, { status: 'not-ready', checks: { database: 'ok', storage: 'ok', draining: true } });
      assert.equal(ready.headers.connection, 'close', 'a kept-alive client is sent to reconnect elsewhere');
      await closing;
      await assert.rejects(fetch(`${s.url}/healthz`), 'after the delay the server no longer listens');
    } finally {
      agent.destroy();
      await s.close();
    }
  });
});
