/**
 * The README's ten lines of TypeScript, run as a newcomer would run them (against
 * a real server, with a real key): the quickstart stays true as the client changes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { startTestServer, type TestServer } from './helpers/server.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The first ```ts block after `heading` in the README. */
function snippetAfter(heading: string): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf(heading);
  assert.ok(from >= 0, `README has "${heading}"`);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(from));
  assert.ok(block, `a TypeScript block follows "${heading}"`);
  return block[1];
}

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
    const code = snippetAfter('The same in ten lines of TypeScript');
    assert.ok(code.trim().split('\n').length <= 12, 'still about ten lines');
    // .mts: outside the repository no package.json says "type": "module".
    const file = path.join(dir, 'first-image.mts');
    fs.writeFileSync(
      file,
      code
        .replaceAll("'./client/", `'${pathToImport(path.join(ROOT, 'client'))}/`)
        .replaceAll('http://127.0.0.1:8080', s.url)
        .replace("'out'", JSON.stringify(path.join(dir, 'out'))),
    );
    const { secret } = await s.user({ gems: 100 });
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, env: { ...process.env, GEMFORGE_API_KEY: secret }, encoding: 'utf8' }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /task task_\w+ \(\d+ Gems quoted, key gf-/);
    assert.match(out.stdout, /succeeded/);
    const saved = fs.readdirSync(path.join(dir, 'out')).sort();
    assert.equal(saved.length, 2);
    for (const name of saved) {
      const meta = await sharp(path.join(dir, 'out', name)).metadata();
      assert.equal(meta.format, 'png');
      assert.ok(meta.width && meta.height && Math.abs(meta.width / meta.height - 16 / 9) < 0.01, `${meta.width}×${meta.height} is 16:9`);
    }
  });
});

/** A path usable inside an import specifier on any platform. */
function pathToImport(p: string): string {
  return p.split(path.sep).join('/');
}
