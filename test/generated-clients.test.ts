/**
 * Clients that third-party generators build from the contract work: the client
 * @hey-api/openapi-ts generates and the one orval generates, each compiled
 * strictly (tsc --strict, no error allowed, the drivers' @ts-expect-error lines
 * included: the speech and music rules and the required Idempotency-Key are in
 * the generated types) and then driven against a real server: the models, an
 * image with its Idempotency-Key, the poll to a terminal task, the output
 * downloaded through its signed URL, an MP4 upload with its own Content-Type,
 * the voices and a speech request. The drivers (test/generated-clients/) use the
 * per-call options docs/client-and-cli.md documents.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createClient } from '@hey-api/openapi-ts';
import { generate } from 'orval';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { newKey } from './helpers/tasks.ts';
import { until } from './helpers/poll.ts';
import { video } from './helpers/media.ts';
import type { CoreCalls } from './generated-clients/core-calls.ts';

const root = path.resolve(import.meta.dirname, '..');
const contract = path.join(root, 'openapi/openapi.yaml');
const drivers = path.join(root, 'test/generated-clients');
const BROOKE = 'voice_72f75e56f33b8e9d6d8f4475';
const TERMINAL = ['succeeded', 'partial', 'failed', 'cancelled'];

/** Both clients generated into `dir` from the contract, next to a copy of the drivers. */
async function generateClients(dir: string): Promise<void> {
  for (const file of fs.readdirSync(drivers)) fs.copyFileSync(path.join(drivers, file), path.join(dir, file));
  await createClient({
    input: contract,
    output: { path: path.join(dir, 'out/hey') },
    plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
    logs: { level: 'silent' },
  });
  await generate({
    input: { target: contract },
    output: {
      target: path.join(dir, 'out/orval/api.ts'),
      client: 'fetch',
      mode: 'single',
      headers: true,
      override: { mutator: { path: path.join(dir, 'orval-fetch.ts'), name: 'orvalFetch' } },
    },
  });
}

/** tsc --strict over the generated clients and the drivers: its output when it fails. */
function compileStrictly(dir: string): { ok: boolean; output: string } {
  const tsconfig = {
    compilerOptions: {
      target: 'ES2022',
      module: 'ESNext',
      moduleResolution: 'Bundler',
      lib: ['ES2023', 'DOM', 'DOM.Iterable'],
      types: [],
      strict: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      noEmit: true,
      // orval imports its mutator by the path given, .ts included.
      allowImportingTsExtensions: true,
      isolatedModules: true,
      skipLibCheck: true,
    },
    include: ['*.ts', 'out/**/*.ts'],
  };
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
  const run = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { encoding: 'utf8', timeout: 300_000 });
  return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` };
}

describe('clients generated from the contract by @hey-api/openapi-ts and orval', () => {
  let s: TestServer;
  let key: string;
  let dir: string;
  let mp4: Uint8Array<ArrayBuffer>;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-clients-'));
    await generateClients(dir);
    mp4 = new Uint8Array(fs.readFileSync(await video('mp4')));
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    key = (await s.user({ gems: 10_000 })).secret;
  });
  after(async () => {
    await s?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when the generated clients and their drivers are compiled with --strict, then there is no error', () => {
    const { ok, output } = compileStrictly(dir);
    assert.ok(ok, output);
  });

  const clients: Array<[string, string, string]> = [
    ['@hey-api/openapi-ts', 'hey-api.ts', 'heyApiCalls'],
    ['orval', 'orval.ts', 'orvalCalls'],
  ];
  for (const [generator, file, factory] of clients) {
    it(`when the ${generator} client makes the core calls against a real server, then each does what the contract says`, async () => {
      const module = (await import(pathToFileURL(path.join(dir, file)).href)) as Record<string, (base: string, key: string) => CoreCalls>;
      const calls = module[factory]!(s.url, key);

      assert.ok((await calls.models()).includes('gemforge-image-1'));

      const idempotencyKey = newKey('generated-client');
      const first = await calls.image('a lighthouse at dusk', idempotencyKey);
      assert.equal(first.status, 202);
      const replay = await calls.image('a lighthouse at dusk', idempotencyKey);
      assert.deepEqual(replay, { status: 200, taskId: first.taskId }, 'the same key replays the same task');

      const done = await until('the image task to end', async () => {
        const t = await calls.task(first.taskId);
        return TERMINAL.includes(t.status) && t;
      });
      assert.equal(done.status, 'succeeded');
      const output = await calls.download(done.urls[0]!);
      assert.equal(output.contentType, 'image/png');
      assert.deepEqual([...output.bytes.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'PNG bytes');

      const asset = await calls.upload(mp4, 'video/mp4');
      assert.deepEqual([asset.status, asset.kind], [201, 'video']);

      const voices = await calls.voices();
      assert.ok(voices.includes(BROOKE), 'the public voices are listed');
      const speech = await calls.speech(BROOKE, newKey('generated-speech'));
      assert.equal(speech.status, 202);
    });
  }
});
