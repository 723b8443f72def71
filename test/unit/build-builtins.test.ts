/**
 * scripts/build.ts takes `node:http` and `node:https` through `require` in the
 * bundles: an ES import of `node:http` reads its getters and loads Node's bundled
 * undici (with http2, tls and zlib) at every start; `node:https` (tls) loads at its
 * first use. Checked on a small bundle run in a Node of its own.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { builtinsByRequire, NODE_BUNDLE } from '../../scripts/build.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-builtins-'));

const ENTRY = `
import http, { createServer, STATUS_CODES } from 'node:http';
import https from 'node:https';
const loaded = (name) => process.moduleLoadList.some((m) => m === 'NativeModule ' + name);
const before = { undici: loaded('internal/deps/undici/undici'), https: loaded('https'), tls: loaded('tls') };
const agent = new https.Agent({ keepAlive: true });
console.log(JSON.stringify({
  before,
  http: typeof http.request === 'function' && createServer === http.createServer && STATUS_CODES[404] === 'Not Found',
  https: agent instanceof https.Agent && typeof https.request === 'function',
  afterUse: { https: loaded('https'), undici: loaded('internal/deps/undici/undici') },
}));
`;

describe('builtins in the bundles', () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when a bundle imports node:http and node:https, then neither undici nor https is loaded at start, and both work when used', async () => {
    fs.writeFileSync(path.join(dir, 'entry.ts'), ENTRY);
    await build({
      entryPoints: [path.join(dir, 'entry.ts')],
      outfile: path.join(dir, 'out.mjs'),
      ...NODE_BUNDLE,
      logLevel: 'silent',
      plugins: [builtinsByRequire],
    });
    const out = JSON.parse(execFileSync(process.execPath, [path.join(dir, 'out.mjs')], { encoding: 'utf8' })) as Record<string, unknown>;
    assert.deepEqual(out, { before: { undici: false, https: false, tls: false }, http: true, https: true, afterUse: { https: true, undici: false } });
  });
});
