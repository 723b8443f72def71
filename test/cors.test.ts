/**
 * CORS as an operator setting (CORS_ORIGINS): a listed origin's preflight is
 * answered 204 with exactly what a browser needs, its calls carry its own origin
 * back and expose the retry headers; an unlisted origin gets no CORS headers,
 * and the console stays same-origin. Raw HTTP first, then a real Chromium page
 * served from another origin calling the API with fetch.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type BrowserContext } from 'playwright-core';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { ARGS, CHROMIUM, missing } from './helpers/chromium.ts';

/** One plain HTTP exchange (node:http sends the Origin header as given, as a browser would). */
function raw(url: string, method: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A tiny page server on another port: the "other origin" a browser app would be served from. */
async function pageServer(html: string): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(html));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const LISTED = 'https://app.example.com';
const preflight = (origin: string, method = 'POST') => ({
  origin,
  'access-control-request-method': method,
  'access-control-request-headers': 'authorization,content-type,idempotency-key',
});

describe('CORS_ORIGINS over raw HTTP', () => {
  let s: TestServer;
  let secret: string;
  before(async () => {
    s = await startTestServer({ env: { CORS_ORIGINS: `${LISTED}, http://localhost:5173` } });
    secret = (await s.user({ gems: 100 })).secret;
  });
  after(() => s?.close());

  it('when a listed origin sends a preflight, then it is answered 204 with its origin, the methods, the API headers and Vary: Origin', async () => {
    const res = await raw(`${s.url}/api/generate/image`, 'OPTIONS', preflight(LISTED));
    assert.equal(res.status, 204);
    assert.equal(res.headers['access-control-allow-origin'], LISTED);
    assert.notEqual(res.headers['access-control-allow-credentials'], 'true');
    assert.match(String(res.headers['access-control-allow-methods']), /\bPOST\b/);
    assert.match(String(res.headers['access-control-allow-methods']), /\bGET\b/);
    const allowed = String(res.headers['access-control-allow-headers'])
      .toLowerCase()
      .split(/\s*,\s*/);
    for (const h of ['authorization', 'content-type', 'idempotency-key', 'x-filename']) assert.ok(allowed.includes(h), `${h} is allowed`);
    assert.match(String(res.headers.vary), /\bOrigin\b/i);
  });

  it('when a listed origin calls the API, then the answer (success or error) carries its origin and exposes the retry headers', async () => {
    const ok = await raw(`${s.url}/api/generate/models`, 'GET', { origin: LISTED, authorization: `Bearer ${secret}` });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['access-control-allow-origin'], LISTED);
    const exposed = String(ok.headers['access-control-expose-headers'])
      .toLowerCase()
      .split(/\s*,\s*/);
    for (const h of ['x-request-id', 'retry-after', 'x-should-retry']) assert.ok(exposed.includes(h), `${h} is exposed`);
    assert.match(String(ok.headers.vary), /\bOrigin\b/i);
    const denied = await raw(`${s.url}/api/generate/models`, 'GET', { origin: 'http://localhost:5173' });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers['access-control-allow-origin'], 'http://localhost:5173', 'a browser can read the error envelope too');
  });

  it('when an unlisted origin calls or sends a preflight, then no CORS header is given and the preflight is not a 2xx or a 500', async () => {
    const call = await raw(`${s.url}/api/generate/models`, 'GET', { origin: 'https://evil.example', authorization: `Bearer ${secret}` });
    assert.equal(call.status, 200);
    assert.equal(call.headers['access-control-allow-origin'], undefined);
    assert.equal(call.headers['access-control-expose-headers'], undefined);
    assert.match(String(call.headers.vary), /\bOrigin\b/i);
    const pre = await raw(`${s.url}/api/generate/image`, 'OPTIONS', preflight('https://evil.example'));
    assert.equal(pre.status, 404);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    assert.equal(pre.headers['access-control-allow-methods'], undefined);
    assert.equal(JSON.parse(pre.body).error.code, 'NOT_FOUND');
  });

  it('when a listed origin asks the console, then the console stays same-origin (no CORS headers)', async () => {
    const res = await raw(`${s.url}/console/api/session`, 'OPTIONS', preflight(LISTED, 'GET'));
    assert.equal(res.headers['access-control-allow-origin'], undefined);
    const page = await raw(`${s.url}/console`, 'GET', { origin: LISTED });
    assert.equal(page.headers['access-control-allow-origin'], undefined);
  });

  it('when CORS_ORIGINS lists something that is not an exact origin, then the server refuses to start', async () => {
    await assert.rejects(startTestServer({ env: { CORS_ORIGINS: 'https://app.example.com/path' } }), /CORS_ORIGINS/);
    await assert.rejects(startTestServer({ env: { CORS_ORIGINS: '*' } }), /CORS_ORIGINS/);
  });
});

describe('CORS_ORIGINS in Chromium', { skip: missing }, () => {
  let listed: TestServer;
  let unlisted: TestServer;
  let page: { origin: string; close(): Promise<void> };
  let browser: BrowserContext;
  let profile: string;
  before(async () => {
    page = await pageServer('<!doctype html><title>app</title><p>another origin</p>');
    listed = await startTestServer({ env: { CORS_ORIGINS: page.origin } });
    unlisted = await startTestServer({ env: { CORS_ORIGINS: 'https://someone-else.example' } });
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-chromium-'));
    browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60_000 });
  });
  after(async () => {
    await browser?.close();
    await listed?.close();
    await unlisted?.close();
    await page?.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });

  /** Runs fetch in a page of the other origin; returns what the page could see. */
  async function fetchFromPage(url: string, init: { method: string; headers: Record<string, string>; body?: string }) {
    const tab = await browser.newPage();
    try {
      await tab.goto(page.origin);
      return await tab.evaluate(
        async ({ url, init }) => {
          try {
            const res = await fetch(url, init);
            return { status: res.status, requestId: res.headers.get('x-request-id'), body: await res.text() };
          } catch (e) {
            return { blocked: String(e) };
          }
        },
        { url, init },
      );
    } finally {
      await tab.close();
    }
  }

  it('when the page origin is listed, then a keyed GET and a preflighted POST with Idempotency-Key both reach the API and their headers are readable', async () => {
    const { secret } = await listed.user({ gems: 1000 });
    const models = await fetchFromPage(`${listed.url}/api/generate/models`, { method: 'GET', headers: { authorization: `Bearer ${secret}` } });
    assert.equal('status' in models && models.status, 200, JSON.stringify(models));
    assert.ok('requestId' in models && models.requestId, 'x-request-id is exposed to the page');
    const image = await fetchFromPage(`${listed.url}/api/generate/image`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': 'cors-browser-1' },
      body: JSON.stringify({ model: 'gemforge-image-1', prompt: 'A lighthouse at dusk' }),
    });
    assert.equal('status' in image && image.status, 202, JSON.stringify(image));
  });

  it('when the page origin is not listed, then the browser blocks the call', async () => {
    const { secret } = await unlisted.user({ gems: 10 });
    const res = await fetchFromPage(`${unlisted.url}/api/generate/models`, { method: 'GET', headers: { authorization: `Bearer ${secret}` } });
    assert.ok('blocked' in res, `the page must not see the answer: ${JSON.stringify(res)}`);
    assert.match(String(res.blocked), /Failed to fetch/);
  });
});
