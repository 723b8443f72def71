/**
 * The client works in a browser bundle: its browser-safe entry (client/index.ts)
 * bundles for `platform: 'browser'` with esbuild without a single Node
 * built-in, and the bundle runs without Node globals such as Buffer or process.
 * (test/client-package.test.ts does the same with the packed package.)
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import vm from 'node:vm';
import { browserContext, bundleForBrowser } from '../helpers/browser.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('client in a browser bundle', () => {
  it('when client/index.ts is bundled for the browser, then no Node module is needed and it runs in a bare context', async () => {
    const { code, inputs } = await bundleForBrowser("export * from './client/index.ts';", ROOT);
    assert.ok(inputs.some((i) => i.includes('openapi-fetch')));
    assert.ok(!inputs.some((i) => /client\/(uploads|downloads)\.ts|client\/cli\//.test(i)), 'Node helpers stay out');
    // A context with only web globals: no Buffer, no process, no require.
    const context = browserContext();
    vm.runInContext(`${code}; this.gemforge = gemforge;`, context);
    const lib = context.gemforge as typeof import('../../client/index.ts');
    assert.match(lib.newIdempotencyKey(), lib.IDEMPOTENCY_KEY_PATTERN);
    const gf = lib.createGemforgeClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'gf_x' });
    assert.equal(typeof gf.images.create, 'function');
    assert.equal(typeof gf.chat.completions.stream, 'function');
  });
});
