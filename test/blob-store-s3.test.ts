/**
 * Media in S3-compatible object storage, against a local
 * S3 server started by the test (s3rver from npm): uploads, generator inputs,
 * outputs and downloads go through the bucket and never stay on the server's
 * disk; signed links keep their behaviour; expired outputs leave the bucket;
 * and (on Postgres) two API processes with their own data directories serve
 * each other's uploads and outputs.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { startLocalS3, type LocalS3 } from './helpers/s3.ts';
import { download, submit, waitForTask } from './helpers/tasks.ts';
import { uploadAsset } from './helpers/uploads.ts';
import { image as imageFixture } from './helpers/media.ts';
import { databaseUrlFor } from './helpers/database.ts';
import { until } from './helpers/poll.ts';
import { loadConfig } from '../server/config.ts';
import { startServer } from '../server/server.ts';

const SECRET = 'c'.repeat(64);

/** Files under a directory, recursively (none when it does not exist). */
function filesUnder(dir: string): string[] {
  return fs.existsSync(dir)
    ? fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]))
    : [];
}

describe('blob store: S3-compatible object storage', () => {
  let s3: LocalS3;
  let s: TestServer;
  before(async () => {
    s3 = await startLocalS3();
    s = await startTestServer({ env: { ...s3.env, WORKER_POLL_MS: '20' } });
  });
  after(async () => {
    await s.close();
    await s3.close();
  });

  it('when an image is uploaded, edited and downloaded, then every byte goes through the bucket and nothing stays on the server disk', async () => {
    const u = await s.user({ gems: 500 });
    const source = await uploadAsset(s, u.secret, await imageFixture('png', 64, 48), 'image/png');
    const task = await waitForTask(
      s,
      u.secret,
      (
        await submit(s, u.secret, '/api/generate/image', {
          model: 'gemforge-image-1',
          prompt: 'make it snow',
          parameters: { resolution: '512', sourceImage: source },
        })
      ).body.task.id,
    );
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const got = await download(task.outputs[0]!.asset!.url);
    assert.equal(got.status, 200);
    assert.equal(got.type, 'image/png');
    assert.equal((await sharp(got.bytes).metadata()).format, 'png');
    assert.deepEqual(filesUnder(path.join(s.dataDir, 'blobs')), [], 'no blob on the server disk');
    assert.deepEqual(
      filesUnder(path.join(s.dataDir, 'tmp')).filter((f) => !f.includes('multipart')),
      [],
      'temp copies of the reference were removed',
    );
    assert.ok(s3.keys().length >= 2, `the upload and the output are in the bucket: ${s3.keys().join(', ')}`);
    const head = await fetch(task.outputs[0]!.asset!.url, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(got.bytes.length));
  });

  it('when a link is tampered with or the object is gone, then the spec answers stay as they are', async () => {
    const u = await s.user({ gems: 100 });
    const task = await waitForTask(
      s,
      u.secret,
      (await submit(s, u.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a fox', parameters: { resolution: '512' } })).body.task.id,
    );
    const url = new URL(task.outputs[0]!.asset!.url);
    url.searchParams.set('sig', '0'.repeat(64));
    assert.equal((await fetch(url)).status, 403);
    for (const key of s3.keys()) fs.rmSync(key);
    assert.equal((await fetch(task.outputs[0]!.asset!.url)).status, 404);
  });

  it('when an output passes its retention, then its object leaves the bucket', async () => {
    const t = await startTestServer({ env: { ...s3.env, WORKER_POLL_MS: '20', WORKER_LEASE_MS: '400', OUTPUT_RETENTION_SECONDS: '1' } });
    try {
      const u = await t.user({ gems: 100 });
      const before = new Set(s3.keys());
      const task = await waitForTask(
        t,
        u.secret,
        (await submit(t, u.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a short-lived fox', parameters: { resolution: '512' } })).body
          .task.id,
      );
      assert.equal(task.status, 'succeeded');
      const added = s3.keys().filter((k) => !before.has(k));
      assert.equal(added.length, 1, 'the output went to the bucket');
      await until('the expired output to leave the bucket', () => !fs.existsSync(added[0]!), 15_000);
    } finally {
      await t.close();
    }
  });

  it('when the bucket cannot be reached, then the server does not start and says which store', async () => {
    const dir = tempDataDir();
    await assert.rejects(
      startServer(loadConfig({ ...s3.env, S3_BUCKET: 'no-such-bucket', LOG_LEVEL: 'silent', DATA_DIR: dir, PORT: '0' })),
      /BLOB_STORE=s3: s3:\/\/no-such-bucket\/ at http:\/\/127\.0\.0\.1:\d+ cannot be reached/,
    );
    assert.throws(() => loadConfig({ BLOB_STORE: 's3' }), /BLOB_STORE=s3 needs S3_BUCKET/);
    assert.throws(() => loadConfig({ BLOB_STORE: 'ftp' }), /BLOB_STORE must be local or s3/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it(
    'when two API processes with their own data directories share the database and the bucket, then each serves the other’s uploads and outputs',
    { skip: process.env.TEST_DATABASE_URL ? false : 'needs Postgres (npm run test:postgres)' },
    async () => {
      const a = await startTestServer({ env: { ...s3.env, SIGNING_SECRET: SECRET, WORKER_POLL_MS: '20' } });
      const b = await startTestServer({
        dataDir: tempDataDir(),
        env: { ...s3.env, SIGNING_SECRET: SECRET, DATABASE_URL: (await databaseUrlFor(a.dataDir))!, WORKER_ENABLED: 'false' },
      });
      try {
        const u = await a.user({ gems: 500 });
        // Uploaded through b, used through a, downloaded from both.
        const source = await uploadAsset(b, u.secret, await imageFixture('png', 64, 48), 'image/png');
        const task = await waitForTask(
          a,
          u.secret,
          (
            await submit(a, u.secret, '/api/generate/image', {
              model: 'gemforge-image-1',
              prompt: 'shared',
              parameters: { resolution: '512', sourceImage: source },
            })
          ).body.task.id,
        );
        assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
        const url = new URL(task.outputs[0]!.asset!.url);
        const fromA = await download(url.toString());
        const fromB = await download(`${b.url}${url.pathname}${url.search}`);
        assert.equal(fromA.status, 200);
        assert.equal(fromB.status, 200);
        assert.ok(fromA.bytes.equals(fromB.bytes));
      } finally {
        await b.close();
        await a.close();
      }
    },
  );
});
