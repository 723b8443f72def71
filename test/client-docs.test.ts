/** /openapi.yaml and /docs: public, the right content types, and nothing fetched from elsewhere. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { parse } from 'yaml';
import { startTestServer, type TestServer } from './helpers/server.ts';

describe('contract and API reference pages', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('when /openapi.yaml is fetched without a key, then it is the contract file as application/yaml', async () => {
    const res = await fetch(`${s.url}/openapi.yaml`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/yaml/);
    const text = await res.text();
    assert.equal(text, fs.readFileSync(s.config.openapiPath, 'utf8'));
    assert.equal((parse(text) as { openapi: string }).openapi, '3.1.0');
  });

  it('when /docs is fetched without a key, then it is an HTML page whose every reference is local and served', async () => {
    const res = await fetch(`${s.url}/docs`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const html = await res.text();
    assert.doesNotMatch(html, /https?:\/\//, 'no external URL');
    assert.doesNotMatch(html, /\/\/[a-z0-9.-]+\.[a-z]{2,}\//i, 'no protocol-relative URL');
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.ok(refs.length >= 3);
    for (const ref of refs) {
      assert.ok(ref.startsWith('/'), `local reference ${ref}`);
      const asset = await fetch(`${s.url}${ref}`);
      assert.equal(asset.status, 200, ref);
      await asset.arrayBuffer();
    }
    const init = await (await fetch(`${s.url}/docs/assets/docs.js`)).text();
    assert.match(init, /fetch\('\/docs\/openapi\.json'\)/);
    assert.match(init, /window\.location\.origin/, 'Try it out goes to the server that serves the page');
    assert.match(init, /validatorUrl: null/, 'no call to a public validator');
    assert.equal((await fetch(`${s.url}/docs/assets/../../package.json`)).status, 404);
  });

  it('when /docs and its assets are fetched, then a Content-Security-Policy keeps them to this origin and no other site may frame them', async () => {
    for (const path of ['/docs', '/docs/assets/docs.js', '/docs/openapi.json', '/openapi.yaml']) {
      const res = await fetch(`${s.url}${path}`);
      await res.arrayBuffer();
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /script-src 'self';/, path);
      assert.match(csp, /connect-src 'self';/, path);
      assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    }
  });

  it('when /docs/openapi.json is fetched, then it is the contract file as JSON', async () => {
    const res = await fetch(`${s.url}/docs/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(await res.json(), parse(fs.readFileSync(s.config.openapiPath, 'utf8')));
  });
});
