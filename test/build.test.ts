/**
 * Production runs the compiled server: `npm start` compiles dist/ when it is
 * missing or stale (scripts/build.mjs), then runs it, with no esbuild process
 * beside it (the console page was bundled by the build), its worker threads
 * (passwords, the moderation of long texts) included; an edited tree never
 * runs the old build (dist/server.mjs refuses), and `npm start` compiles again.
 * Run on a copy of the repository (node_modules linked), so the build under
 * test never touches the dist/ that other tests may be using.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tempDataDir } from './helpers/server.ts';
import { freePort } from './helpers/ports.ts';
import { run } from './helpers/run.ts';
import { COMPILED_SERVER_ARGS } from '../server/node-flags.ts';
import { openDb } from '../server/storage/db.ts';
import { createAccount, createKey } from '../server/domain/accounts.ts';
import { setPassword } from '../server/domain/console.ts';
import { systemClock } from '../server/domain/clock.ts';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { parsedYamlName } from '../server/yaml-file.ts';

const EMAIL = 'compiled@example.com';
const PASSWORD = 'correct horse battery staple';

const ROOT = path.resolve(import.meta.dirname, '..');
/** What the build and the compiled server read: the sources, the contracts and the build scripts. */
const COPIED = ['package.json', 'server', 'scripts', 'openapi', 'generated', 'client'];

/** The processes under `pid` (Linux /proc), with their command names. */
function descendants(pid: number): string[] {
  const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return children.flatMap((c) => [fs.readFileSync(`/proc/${c}/comm`, 'utf8').trim(), ...descendants(Number(c))]);
}

async function answer(url: string): Promise<Response | undefined> {
  try {
    return await fetch(url);
  } catch {
    return undefined;
  }
}

describe('the compiled server', () => {
  let copy: string;
  let dataDir: string;
  let apiKey: string;
  before(async () => {
    copy = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-build-'));
    for (const entry of COPIED) {
      fs.cpSync(path.join(ROOT, entry), path.join(copy, entry), { recursive: true, filter: (src) => !/[/\\](node_modules|dist)$/.test(src) });
    }
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
    dataDir = tempDataDir();
    // A console login, so a sign-in exercises a worker thread of the compiled server (the password pool).
    const db = await openDb({ dataDir });
    try {
      const account = await createAccount(db, systemClock, { name: 'compiled' });
      await setPassword(db, systemClock, { accountId: account.id, email: EMAIL, password: PASSWORD });
      // And a key, so a long prompt exercises the other (moderation on a thread).
      apiKey = (await createKey(db, systemClock, 'gf', { accountId: account.id, name: 'compiled', scopes: ['generate'] })).secret;
    } finally {
      await db.destroy();
    }
  });
  after(() => {
    fs.rmSync(copy, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** `npm start` in the copy until it serves: its stderr, the console script and the processes beside the server. */
  async function npmStart(): Promise<{ stderr: string; consoleJs: string; beside: string[] }> {
    const port = await freePort();
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: copy,
      env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    npm.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise((resolve) => npm.once('exit', resolve));
    try {
      const base = `http://127.0.0.1:${port}`;
      const end = Date.now() + 120_000;
      while ((await answer(`${base}/healthz`))?.status !== 200) {
        if (npm.exitCode !== null || Date.now() > end) throw new Error(`npm start did not serve: ${stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      const models = await fetch(`${base}/api/generate/models`, { headers: { authorization: 'Basic x' } });
      assert.equal(models.status, 401, 'the contract loaded: the validator answers');
      assert.equal(((await models.json()) as { error: { code: string } }).error.code, 'INVALID_API_KEY');
      const session = await fetch(`${base}/console/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
      });
      assert.equal(session.status, 200, `a sign-in (argon2 on the compiled worker thread): ${await session.text()}`);
      const long = await fetch(`${base}/api/generate/image`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': `compiled-${Date.now()}` },
        body: JSON.stringify({ model: 'gemforge-image-1', prompt: 'how to make a pipe bomb for the school. '.repeat(75), parameters: { resolution: '512' } }),
      });
      assert.equal(long.status, 422, `a long prompt refused (moderation on the compiled worker thread): ${await long.text()}`);
      const page = await fetch(`${base}/console/assets/console.js`);
      assert.equal(page.status, 200);
      return { stderr, consoleJs: await page.text(), beside: descendants(npm.pid!) };
    } finally {
      npm.kill('SIGTERM');
      await exited;
    }
  }

  it('when npm start runs on a tree never built, then it compiles dist/ and serves from it, the console page and its sign-in (a worker thread) included, with no esbuild process', async () => {
    const { stderr, consoleJs, beside } = await npmStart();
    assert.match(stderr, /compiled the server into dist\/ .*dist\/ was never built/);
    assert.ok(fs.existsSync(path.join(copy, 'dist/server.mjs')));
    assert.ok(consoleJs.length > 1000, 'the bundled console script is served');
    // What a start reads instead of building: the shipped policy's vocabulary tries, and the contract's notes.
    const tries = loadModerationPolicy(path.join(ROOT, 'server/catalog/moderation.yaml')).vocabulary.triesName;
    assert.deepEqual(fs.readdirSync(path.join(copy, 'dist/vocabulary')), [tries]);
    const contract = fs.readFileSync(path.join(copy, 'openapi/openapi.yaml'), 'utf8');
    assert.match(fs.readFileSync(path.join(copy, 'dist/yaml', `${parsedYamlName(contract)}.checked`), 'utf8'), /, bundling changes nothing$/);
    assert.ok(!beside.some((name) => name.startsWith('esbuild')), `processes beside the server: ${beside.join(', ')}`);
  });

  it('when a source changes after the build, then the compiled server refuses to run and npm start compiles again', async () => {
    const app = path.join(copy, 'server/app.ts');
    fs.appendFileSync(app, '\n// edited after the build\n');
    const stale = await run(process.execPath, [...COMPILED_SERVER_ARGS], { cwd: copy, env: { ...process.env, DATA_DIR: dataDir, PORT: '0' } });
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /stale \(server\/app\.ts changed\)/);
    const { stderr } = await npmStart();
    assert.match(stderr, /compiled the server into dist\/ .*server\/app\.ts changed/);
  });
});
