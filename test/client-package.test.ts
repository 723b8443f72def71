/**
 * The client as an application gets it: `npm pack ./client`,
 * installed into a fresh project offline from the packed file, and used there
 * against a real server: a type-checked TypeScript program (the README's ten
 * lines, and a streamed completion), the installed `gemforge` CLI, and the
 * browser entry bundled by esbuild and run in a context with only web globals.
 * Also: the package's copy of the contract types is not stale, and the package
 * says what it is (version, licence, exports, bin).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import sharp from 'sharp';
import { HELP } from '../client/cli/help.ts';
import { browserContext, bundleForBrowser } from './helpers/browser.ts';
import { CLIENT_DIR, installPacked, packClient, ROOT } from './helpers/packed.ts';
import { assertTenLinesRan, snippetAfter, TEN_LINES } from './helpers/readme.ts';
import { run } from './helpers/run.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

const pkg = JSON.parse(fs.readFileSync(path.join(CLIENT_DIR, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  license: string;
  files: string[];
  exports: Record<string, Record<string, string>>;
  types: string;
  bin: Record<string, string>;
  engines: { node: string };
  dependencies: Record<string, string>;
};

describe('client package: what it ships', () => {
  it('when the contract is regenerated, then the types the package ships equal it (run "npm run generate" otherwise)', async () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gen-client-')), 'api.ts');
    const gen = await run(
      process.execPath,
      [path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), 'openapi/openapi.yaml', '--default-non-nullable', 'false', '-o', out],
      { cwd: ROOT },
    );
    assert.equal(gen.code, 0, gen.stderr);
    const fresh = fs.readFileSync(out, 'utf8');
    assert.ok(
      fresh === fs.readFileSync(path.join(CLIENT_DIR, 'generated/api.ts'), 'utf8'),
      'client/generated/api.ts is stale: run "npm run generate" and commit the result',
    );
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  });

  it('when the manifest is read, then it has a version, a licence, both entries with types, the bin, and the dependencies the repository pins', () => {
    const root = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    assert.equal(pkg.name, '@gemforge/client');
    assert.match(pkg.version, /^\d+\.\d+\.\d+$/);
    assert.equal(pkg.license, 'MIT');
    assert.deepEqual(Object.keys(pkg.exports).sort(), ['.', './node', './package.json']);
    assert.equal(pkg.exports['.'].types, pkg.types);
    assert.equal(pkg.exports['./node'].types, './dist/node.d.ts');
    assert.equal(pkg.bin.gemforge, 'dist/cli/bin.js');
    assert.ok(pkg.files.includes('dist'));
    // The package's dependencies are installed (and tested) here: the same exact versions as the repository's.
    for (const [name, version] of Object.entries(pkg.dependencies)) assert.equal(root.dependencies[name], version, name);
  });
});

describe('client package: installed from the packed file', () => {
  let s: TestServer;
  let work: string;
  let app: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-pkg-'));
    const [server, tarball] = await Promise.all([startTestServer({ env: { WORKER_POLL_MS: '20', TEXT_STREAM_DELAY_MS: '0' } }), packClient(work)]);
    s = server;
    app = await installPacked(tarball, work);
    const { secret } = await s.user({ gems: 10_000, llmAllowance: 10_000 });
    // Node of this test first on the PATH: the bin's `#!/usr/bin/env node` and npx use it.
    const PATH = [path.dirname(process.execPath), process.env.PATH].join(path.delimiter);
    env = { PATH, HOME: process.env.HOME, GEMFORGE_API_KEY: secret, GEMFORGE_BASE_URL: s.url, GEMFORGE_POLL_SCHEDULE_MS: '100' };
  });
  after(async () => {
    await s?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('when the installed package is listed, then it holds the built entries and no repository sources', () => {
    const installed = path.join(app, 'node_modules', pkg.name);
    for (const file of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/node.js',
      'dist/node.d.ts',
      'dist/cli/bin.js',
      'dist/generated/api.d.ts',
      'LICENSE',
      'README.md',
    ]) {
      assert.ok(fs.existsSync(path.join(installed, file)), file);
    }
    const everything = fs.readdirSync(installed, { recursive: true }).map(String);
    assert.ok(!everything.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')), 'no TypeScript sources');
    const js = everything
      .filter((f) => f.endsWith('.js'))
      .map((f) => fs.readFileSync(path.join(installed, f), 'utf8'))
      .join('\n');
    assert.doesNotMatch(js, /server\/|from '\.\.\/\.\.\/|tsx/, 'nothing from the server or the repository');
  });

  it("when a TypeScript program uses the package, then it type-checks (a wrong field does not), and run against the server it saves the README's two images and streams a completion", async () => {
    fs.writeFileSync(path.join(app, 'first-image.mts'), snippetAfter(TEN_LINES).replaceAll('http://127.0.0.1:8080', s.url));
    fs.writeFileSync(path.join(app, 'stream.mts'), STREAM_PROGRAM);
    fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify(tsconfig(['first-image.mts', 'stream.mts'])));
    const tsc = await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: app, timeout: 120_000 });
    assert.equal(tsc.code, 0, tsc.stdout + tsc.stderr);

    const images = await run(process.execPath, ['build/first-image.mjs'], { cwd: app, env });
    assert.equal(images.code, 0, images.stderr);
    await assertTenLinesRan(images.stdout, path.join(app, 'out'));

    const streamed = await run(process.execPath, ['build/stream.mjs'], { cwd: app, env });
    assert.equal(streamed.code, 0, streamed.stderr);
    const result = JSON.parse(streamed.stdout) as { content: string; chunks: number; finish_reason: string; idempotencyKey: string };
    assert.match(result.content, /You said: "hello from the package"/);
    assert.ok(result.chunks > 1, 'more than one chunk');
    assert.equal(result.finish_reason, 'stop');
    assert.match(result.idempotencyKey, /^gf-/);
  });

  it('when the installed gemforge runs image, text --stream and task --wait, then it saves PNGs and prints the streamed answer', async () => {
    const gemforge = (...args: string[]) => run(process.execPath, [path.join(app, 'node_modules/.bin/gemforge'), ...args], { cwd: app, env });
    const image = await gemforge('image', 'a packaged fox', '--param', 'resolution=512', '--out', 'cli-out');
    assert.equal(image.code, 0, image.stderr);
    assert.equal((await sharp(path.join(app, image.stdout.trim())).metadata()).width, 512);

    const text = await gemforge('text', 'hello from the package', '--stream');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /You said: "hello from the package"/);

    const queued = await gemforge('image', 'a patient fox', '--param', 'resolution=512', '--no-wait');
    assert.equal(queued.code, 0, queued.stderr);
    const id = queued.stdout.trim();
    assert.match(id, /^task_\w+$/);
    const waited = await gemforge('task', id, '--wait', '--out', 'task-out');
    assert.equal(waited.code, 0, waited.stderr);
    assert.equal(waited.stdout.trim(), path.join('task-out', `${id}-0.png`));
    assert.equal((await sharp(path.join(app, waited.stdout.trim())).metadata()).format, 'png');
  });

  it('when npx gemforge --help and --version run in the project, then every command is listed and the version is the package’s', async () => {
    const help = await run('npx', ['--offline', 'gemforge', '--help'], { cwd: app, env });
    assert.equal(help.code, 0, help.stderr);
    for (const command of Object.keys(HELP)) assert.match(help.stdout, new RegExp(`^  ${command} `, 'm'), `${command} is listed`);
    const version = await run('npx', ['--offline', 'gemforge', '--version'], { cwd: app, env });
    assert.equal(version.stdout.trim(), pkg.version);
    const admin = await run('npx', ['--offline', 'gemforge', 'admin', 'key', 'list'], { cwd: app, env });
    assert.equal(admin.code, 2);
    assert.match(admin.stderr, /runs with the server/);
  });

  it('when the browser entry is bundled by esbuild, then it needs no Node module and, in a context with only web globals, lists models and streams a completion', async () => {
    const { code, inputs } = await bundleForBrowser("export * from '@gemforge/client';", app);
    assert.ok(inputs.some((i) => i.includes('node_modules/@gemforge/client/dist/index.js')));
    assert.ok(!inputs.some((i) => /dist\/(uploads|downloads|node)\.js|dist\/cli\//.test(i)), 'Node helpers stay out');

    const { secret } = await s.user({ gems: 100, llmAllowance: 100 });
    const context = browserContext({ baseUrl: s.url, apiKey: secret });
    vm.runInContext(code, context);
    const seen = (await vm.runInContext(
      `(async () => {
        const gf = gemforge.createGemforgeClient({ baseUrl, apiKey });
        const { models } = await gf.models.list();
        const stream = await gf.chat.completions.stream({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hello browser' }] });
        const done = await stream.finalCompletion();
        return JSON.stringify({ models: models.map((m) => m.id), content: done.content, key: stream.idempotencyKey, process: typeof process, require: typeof require, Buffer: typeof Buffer });
      })()`,
      context,
    )) as string;
    const got = JSON.parse(seen) as { models: string[]; content: string; key: string; process: string; require: string; Buffer: string };
    assert.deepEqual([got.process, got.require, got.Buffer], ['undefined', 'undefined', 'undefined']);
    assert.ok(got.models.includes('gemforge-image-1'));
    assert.match(got.content, /You said: "hello browser"/);
    assert.match(got.key, /^gf-/);
  });
});

/** The temporary project's compiler options: a strict NodeNext project, the package's .d.ts checked too. */
function tsconfig(files: string[]) {
  return {
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      skipLibCheck: false,
      types: ['node'],
      typeRoots: [path.join(ROOT, 'node_modules/@types')],
      outDir: 'build',
      rootDir: '.',
    },
    files,
  };
}

/** A program an application might write: stream a completion with the typed chunks, print what it added up to. */
const STREAM_PROGRAM = `import { createGemforgeClient, StreamError, type ChatCompletionChunk } from '@gemforge/client';

const gf = createGemforgeClient({ baseUrl: process.env.GEMFORGE_BASE_URL!, apiKey: process.env.GEMFORGE_API_KEY! });
const stream = await gf.chat.completions.stream({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hello from the package' }] });
const chunks: ChatCompletionChunk[] = [];
try {
  for await (const chunk of stream) chunks.push(chunk);
} catch (error) {
  if (error instanceof StreamError) console.error(\`incomplete: replay with \${error.idempotencyKey}\`);
  throw error;
}
const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
const finish_reason = chunks.map((c) => c.choices[0]?.finish_reason).find(Boolean);
console.log(JSON.stringify({ content, chunks: chunks.length, finish_reason, idempotencyKey: stream.idempotencyKey }));

/** Never called: the types are the contract's, so a wrong field does not compile (an unused directive would). */
export function wrongField() {
  // @ts-expect-error \`promt\` is not a field of ImageRequest
  return gf.images.create({ model: 'gemforge-image-1', promt: 'a fox' });
}
`;
