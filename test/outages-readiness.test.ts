/**
 * Readiness that means it, with BLOB_STORE=s3 against a local S3-compatible
 * server: the instance's own temp directory (every upload and output passes
 * through it) is checked as well as the bucket, and the shared bucket is
 * reported failed only after consecutive failed checks, so one blip does not
 * take every instance out of the balancer at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { startLocalS3, type LocalS3 } from './helpers/s3.ts';
import { SHARED_FAILURES_BEFORE_NOT_READY } from '../server/domain/readiness.ts';

async function readyz(s: TestServer): Promise<{ status: number; storage: string }> {
  const res = await fetch(`${s.url}/readyz`);
  return { status: res.status, storage: ((await res.json()) as { checks: { storage: string } }).checks.storage };
}

describe('outages: readiness with an object store', () => {
  let s3: LocalS3;
  let s: TestServer;
  before(async () => {
    s3 = await startLocalS3();
    s = await startTestServer({ env: { ...s3.env, WORKER_ENABLED: 'false' } });
  });
  after(async () => {
    await s.close();
    await s3.close();
  });

  it('when the local temp directory cannot be written, then /readyz answers 503 although the bucket answers', async () => {
    const tmp = path.join(s.dataDir, 'tmp');
    assert.equal((await readyz(s)).status, 200);
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.writeFileSync(tmp, 'not a directory');
    try {
      const ready = await readyz(s);
      assert.equal(ready.status, 503);
      assert.match(ready.storage, /^failed:/);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    assert.equal((await readyz(s)).status, 200);
  });

  it('when the bucket stops answering, then /readyz stays ready until consecutive checks failed, and is ready again once it answers', async () => {
    await s3.pause();
    try {
      for (let i = 1; i < SHARED_FAILURES_BEFORE_NOT_READY; i++) assert.equal((await readyz(s)).status, 200, `check ${i} of an outage is tolerated`);
      const ready = await readyz(s);
      assert.equal(ready.status, 503);
      assert.match(ready.storage, /^failed:/);
    } finally {
      await s3.resume();
    }
    assert.equal((await readyz(s)).status, 200);
  });
});
