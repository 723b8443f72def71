/**
 * The client works in a browser bundle: its browser-safe entry (client/index.ts)
 * bundles for `platform: 'browser'` with esbuild without a single Node built-in, and the bundle runs without Node
 * globals such as Buffer or process.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import vm from 'node:vm';
import { build } from 'esbuild';
import { browserContext } from '../helpers/browser.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('client in a browser bundle', () => {
  it('when client/index.ts is bundled for the browser, then no Node module is needed and it runs in a bare context', async () => {
    const result = await build({
      entryPoints: [path.join(ROOT, 'client/index.ts')],
      bundle: true,
      platform: 'browser',
      format: 'iife',
      globalName: 'gemforge',
      write: false,
      logLevel: 'silent',
      metafile: true,
    });
    const inputs = Object.keys(result.metafile.inputs);
    assert.ok(inputs.every((i) => !i.startsWith('node:')), inputs.join(', '));
    assert.ok(inputs.some((i) => i.includes('openapi-fetch')));
    assert.ok(!inputs.some((i) => /client\/(uploads|downloads)\.ts|client\/cli\//.test(i)), 'Node helpers stay out');
    // A context with only web globals: no Buffer, no process, no require.
    const context = browserContext();
    vm.runInContext(`${result.outputFiles[0].text}; this.gemforge = gemforge;`, context);
    const lib = context.gemforge as typeof import('../../client/index.ts');
    assert.match(lib.newIdempotencyKey(), lib.IDEMPOTENCY_KEY_PATTERN);
    const gf = lib.createGemforgeClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'gf_x' });
    assert.equal(typeof gf.images.create, 'function');
    assert.equal(typeof gf.chat.completions.stream, 'function');
  });
});
