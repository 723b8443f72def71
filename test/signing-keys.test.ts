/**
 * URL-signing keys shared by instances: from SIGNING_SECRET,
 * or from the database (created once, seeded by an installation's old DATA_DIR
 * secret, rotated with `gemforge admin signing rotate`); links signed with a
 * retired key stay valid until they expire, and a rotation reaches a running
 * server within seconds.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { dbEnvFor, databaseUrlFor } from './helpers/database.ts';
import { until } from './helpers/poll.ts';
import { createSigner } from '../server/domain/signing.ts';
import { parseSecret } from '../server/config.ts';
import { loadConfig } from '../server/config.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SECRET_A = 'a'.repeat(64);
const SECRET_B = 'b'.repeat(64);

/** An image output's signed URL from this server. */
async function outputUrl(s: TestServer): Promise<string> {
  const u = await s.user({ gems: 100 });
  const r = await submit(s, u.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a signed fox', parameters: { resolution: '512' } });
  const task = await waitForTask(s, u.secret, r.body.task.id);
  return task.outputs[0]!.asset!.url;
}

/** Whether a link was signed with the key whose secret (hex, as stored) is `secretHex`. */
function signedWith(secretHex: string, url: string): boolean {
  const { pathname, searchParams: q } = new URL(url);
  return createSigner(Buffer.from(secretHex, 'hex'), 60).verify(pathname.split('/').pop()!, q.get('expires')!, q.get('sig')!, new Date()) === 'ok';
}

const statusOf = async (url: string) => (await fetch(url)).status;
/** The same link presented to another server. */
const at = (url: string, base: string) => `${base}${new URL(url).pathname}${new URL(url).search}`;

describe('URL-signing keys', () => {
  it('when a secret is configured, then it is 64 hex characters or a passphrase of at least 32, and a short one stops the start', () => {
    assert.equal(parseSecret(SECRET_A, 'S').length, 32);
    assert.equal(parseSecret('correct horse battery staple, twice over', 'S').length, 32);
    assert.throws(() => loadConfig({ SIGNING_SECRET: 'short' }), /SIGNING_SECRET must be at least 32 characters/);
    assert.throws(() => loadConfig({ SIGNING_SECRET: SECRET_A, SIGNING_SECRET_PREVIOUS: 'x' }), /SIGNING_SECRET_PREVIOUS/);
  });

  it('when a signer holds a previous key, then links signed with either verify and a link signed with neither is invalid', () => {
    const now = new Date();
    const oldSigner = createSigner(parseSecret(SECRET_A, 'S'), 60);
    const rotated = createSigner({ current: parseSecret(SECRET_B, 'S'), previous: [parseSecret(SECRET_A, 'S')] }, 60);
    const stranger = createSigner(parseSecret('c'.repeat(64), 'S'), 60);
    const query = (url: string) => new URL(url).searchParams;
    for (const [signer, expected] of [
      [oldSigner, 'ok'],
      [rotated, 'ok'],
      [stranger, 'invalid'],
    ] as const) {
      const q = query(signer.sign('http://h', 'asset_1', now));
      assert.equal(rotated.verify('asset_1', q.get('expires')!, q.get('sig')!, now), expected);
    }
  });

  it('when two instances with different data directories share SIGNING_SECRET, then each accepts the other’s links; with different secrets they refuse them', async () => {
    const a = await startTestServer({ env: { SIGNING_SECRET: SECRET_A } });
    const b = await startTestServer({ env: { SIGNING_SECRET: SECRET_A } });
    const c = await startTestServer({ env: { SIGNING_SECRET: SECRET_B } });
    try {
      const url = await outputUrl(a);
      assert.equal(await statusOf(url), 200);
      // b has its own database and disk, so the asset is not there (404) — but the signature holds.
      assert.equal(await statusOf(at(url, b.url)), 404);
      assert.equal(await statusOf(at(url, c.url)), 403);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it('when SIGNING_SECRET changes with the old one kept in SIGNING_SECRET_PREVIOUS, then links signed before still open', async () => {
    const dir = tempDataDir();
    const before = await startTestServer({ dataDir: dir, env: { SIGNING_SECRET: SECRET_A } });
    const url = await outputUrl(before);
    await before.close();
    const after = await startTestServer({ dataDir: dir, env: { SIGNING_SECRET: SECRET_B, SIGNING_SECRET_PREVIOUS: SECRET_A } });
    const dropped = await startTestServer({ dataDir: tempDataDir(), env: { SIGNING_SECRET: SECRET_B } });
    try {
      assert.equal(await statusOf(at(url, after.url)), 200);
      assert.equal(await statusOf(at(url, dropped.url)), 403, 'without the previous secret the old link is refused');
    } finally {
      await after.close();
      await dropped.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when no secret is configured, then the database key is created once, kept across restarts, and seeded from an old DATA_DIR secret', async () => {
    const dir = tempDataDir();
    const legacy = crypto.randomBytes(32).toString('hex');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'server-secret'), legacy);
    const first = await startTestServer({ dataDir: dir });
    const url = await outputUrl(first);
    const keys = await first.db('signing_keys').select();
    await first.close();
    assert.equal(keys.length, 1);
    assert.equal(keys[0].secret, legacy, 'the old per-disk secret seeds the database key, so links already handed out stay valid');
    const legacySigner = createSigner(Buffer.from(legacy, 'hex'), 3600);
    const q = new URL(url).searchParams;
    assert.equal(legacySigner.verify(new URL(url).pathname.split('/').pop()!, q.get('expires')!, q.get('sig')!, new Date()), 'ok');

    const second = await startTestServer({ dataDir: dir });
    try {
      assert.equal(await statusOf(at(url, second.url)), 200);
      assert.equal((await second.db('signing_keys').count({ n: '*' }))[0]!.n, 1, 'no second key');
    } finally {
      await second.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when the key is rotated with the admin CLI, then the running server signs with the new key within seconds and old links stay valid until they expire', async () => {
    const s = await startTestServer();
    try {
      const oldUrl = await outputUrl(s);
      const run = await promisify(execFile)(process.execPath, [path.join(ROOT, 'scripts/gemforge.mjs'), 'admin', 'signing', 'rotate'], {
        env: { ...process.env, ...(await dbEnvFor(s.dataDir)), SIGNING_SECRET: '' },
      });
      const keyId = (JSON.parse(run.stdout) as { keyId: number }).keyId;
      assert.ok(keyId > 1);
      const rows = await s.db('signing_keys').orderBy('id');
      assert.equal(rows.length, 2);
      assert.ok(rows[0].retired_at && !rows[1].retired_at);
      assert.ok(!signedWith(rows[1].secret, oldUrl));
      const newUrl = await until(
        'the server signs with the rotated key',
        async () => {
          const url = await outputUrl(s);
          return signedWith(rows[1].secret, url) && url;
        },
        15_000,
        250,
      );
      assert.equal(await statusOf(newUrl), 200);
      assert.equal(await statusOf(oldUrl), 200, 'a link signed before the rotation still opens');
    } finally {
      await s.close();
    }
  });

  it(
    'when two instances with their own data directories share one Postgres database, then each accepts the other’s links, before and after a rotation',
    { skip: process.env.TEST_DATABASE_URL ? false : 'needs Postgres (npm run test:postgres)' },
    async () => {
      const a = await startTestServer();
      const shared = (await databaseUrlFor(a.dataDir))!;
      // b has no worker: every output is made by a's, so its bytes are on a's disk.
      const b = await startTestServer({ dataDir: tempDataDir(), env: { DATABASE_URL: shared, WORKER_ENABLED: 'false' } });
      try {
        // The signature holds on b (not 403); the bytes are still on a's disk until blobs leave DATA_DIR (an S3 store): 404.
        const url = await outputUrl(a);
        assert.equal(await statusOf(at(url, b.url)), 404);
        const { rotateSigningKey } = await import('../server/storage/signing-keys.ts');
        await rotateSigningKey(a.db, new Date().toISOString());
        const current = (await a.db('signing_keys').whereNull('retired_at').first()) as { secret: string };
        // Each instance re-reads the keys on its own timer (every 5 s): a signs with the new key, then b verifies it.
        const rotated = await until(
          'a signs with the new key',
          async () => {
            const fresh = await outputUrl(a);
            return signedWith(current.secret, fresh) && fresh;
          },
          15_000,
          250,
        );
        await until(
          "b verifies links signed with the new key (404: its bytes are on a's disk; not 403)",
          async () => (await statusOf(at(rotated, b.url))) === 404,
          15_000,
          250,
        );
        assert.equal(await statusOf(at(url, b.url)), 404, 'and still the old ones');
        assert.equal(await statusOf(url), 200);
      } finally {
        await b.close();
        await a.close();
      }
    },
  );
});
