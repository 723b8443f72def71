/**
 * The README's ten lines of TypeScript, run from the client's sources against a
 * real server with a real key: the quickstart stays true as the client changes.
 * (test/client-package.test.ts runs them again from the installed package.)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertTenLinesRan, snippetAfter, TEN_LINES } from './helpers/readme.ts';
import { run } from './helpers/run.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

describe('README', () => {
  let s: TestServer;
  let dir: string;
  before(async () => {
    s = await startTestServer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-readme-'));
  });
  after(async () => {
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when the ten lines of TypeScript run against the server, then they save two 16:9 images', async () => {
    const code = snippetAfter(TEN_LINES);
    assert.ok(code.trim().split('\n').length <= 12, 'still about ten lines');
    // .mts: outside the repository no package.json says "type": "module".
    const file = path.join(dir, 'first-image.mts');
    fs.writeFileSync(
      file,
      code
        // From the sources here; test/client-package.test.ts runs the same lines against the packed package.
        .replaceAll("'@gemforge/client/node'", `'${pathToImport(path.join(ROOT, 'client/node.ts'))}'`)
        .replaceAll("'@gemforge/client'", `'${pathToImport(path.join(ROOT, 'client/index.ts'))}'`)
        .replaceAll('http://127.0.0.1:8080', s.url)
        .replace("'out'", JSON.stringify(path.join(dir, 'out'))),
    );
    const { secret } = await s.user({ gems: 100 });
    const out = await run(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, env: { ...process.env, GEMFORGE_API_KEY: secret } });
    assert.equal(out.code, 0, out.stderr);
    await assertTenLinesRan(out.stdout, path.join(dir, 'out'));
  });
});

/** A path usable inside an import specifier on any platform. */
function pathToImport(p: string): string {
  return p.split(path.sep).join('/');
}
