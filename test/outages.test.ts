/**
 * Outages of the stores the worker writes to: while the object store is down
 * or the disk is full, a finished output is kept and its job handed back with
 * a backoff; once the store is back every task succeeds, no output is made
 * twice and nothing is charged twice. The S3 case runs against a real local
 * S3-compatible server that the test stops and starts again; a full disk
 * cannot be made for real in a test, so it is the blob store's fault-injection
 * seam (`diskFaults`) that answers ENOSPC.
 */
import { after, afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { startLocalS3, type LocalS3 } from './helpers/s3.ts';
import { assertSettled, submit, waitForTask } from './helpers/tasks.ts';
import { countingProviders } from './helpers/counting-providers.ts';
import { until } from './helpers/poll.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';
import { defaultMediaProviders } from '../server/providers/media.ts';
import { findJobByTask } from '../server/storage/jobs.ts';
import { diskFaults } from '../server/storage/blobs.ts';
import { storeErrorCounts } from '../server/storage/outages.ts';
import { createWorkerMetrics } from '../server/http/metrics.ts';
import type { MediaProviders } from '../server/providers/media-types.ts';

const ENV = { WORKER_POLL_MS: '20', WORKER_RETRY_BACKOFF_MS: '50' };

/** Submits `n` images and waits until each was generated once and its job handed back at least once. */
async function submitDuringOutage(s: TestServer, key: string, n: number, calls: () => number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await submit(s, key, '/api/generate/image', { model: 'gemforge-image-1', prompt: `outage fox ${i}`, parameters: { resolution: '512' } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    ids.push(r.body.task.id);
  }
  await until('every output generated and its job handed back', async () => {
    if (calls() < n) return false;
    for (const id of ids) if (((await findJobByTask(s.db, id))?.store_retries ?? 0) < 1) return false;
    return true;
  });
  return ids;
}

async function assertAllSucceededOnce(s: TestServer, user: { accountId: string; secret: string }, ids: string[], before: number): Promise<void> {
  let charged = 0;
  for (const id of ids) {
    const task = await waitForTask(s, user.secret, id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assertSettled(task);
    charged += task.chargedGems;
  }
  const after = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
  assert.equal(after.balance, before - charged, 'each task charged once');
  assert.equal(after.outstandingReservations.count, 0);
  const kept = path.join(s.dataDir, 'tmp', 'kept');
  assert.deepEqual(fs.existsSync(kept) ? fs.readdirSync(kept) : [], [], 'kept outputs are gone once stored');
}

/**
 * The image generator writing its output onto a full disk for real: its temp
 * file is a link to /dev/full (every write there fails with ENOSPC) while `full()`.
 */
function fullDiskProviders(full: () => boolean): { providers: MediaProviders; calls: () => number; links: string[] } {
  const base = defaultMediaProviders();
  const image = base.image!;
  let calls = 0;
  const links: string[] = [];
  const generate: typeof image.generate = (job, tools) => {
    calls++;
    if (!full()) return image.generate(job, tools);
    return image.generate(job, {
      ...tools,
      tempFile: async (suffix) => {
        const file = await tools.tempFile(suffix);
        fs.symlinkSync('/dev/full', file);
        links.push(file);
        return file;
      },
    });
  };
  return { providers: { ...base, image: { ...image, generate } }, calls: () => calls, links };
}

describe('outages: a store that fails while the worker finishes outputs', () => {
  let s3: LocalS3 | undefined;
  let s: TestServer | undefined;
  afterEach(async () => {
    diskFaults.write = undefined;
    await s?.close();
    s = undefined;
  });
  after(async () => {
    await s3?.close();
  });

  it('when the object store stops while tasks finish and comes back, then every task succeeds, none generated twice, none charged twice', async () => {
    s3 = await startLocalS3();
    const counted = countingProviders();
    s = await startTestServer({ env: { ...s3.env, ...ENV }, providers: counted.providers });
    const user = await s.user({ gems: 500 });
    const before = (await ledger.accountSummary(s.db, systemClock, user.accountId, [])).balance;
    const objectStoreErrors = () => [...storeErrorCounts].filter(([key]) => key.startsWith('object store\t')).reduce((sum, [, n]) => sum + n, 0);
    const errorsBefore = objectStoreErrors();
    await s3.pause();
    const ids = await submitDuringOutage(s, user.secret, 3, counted.calls);
    for (const id of ids) assert.notEqual(await waitForTaskStatus(s, user.secret, id), 'failed');
    assert.ok(objectStoreErrors() > errorsBefore, 'the failures are counted against the object store');
    await s3.resume();
    await assertAllSucceededOnce(s, user, ids, before);
    assert.equal(counted.calls(), 3, 'each output generated once');
    const metrics = await createWorkerMetrics().text();
    assert.match(metrics, /gemforge_store_errors_total\{store="object store",operation="(has|put)"\} [1-9]/);
    assert.match(metrics, /gemforge_worker_jobs_total\{event="handed back"\} [1-9]/);
  });

  it('when the disk is full while tasks finish and space comes back, then every task succeeds, none generated twice, none charged twice', async () => {
    const counted = countingProviders();
    s = await startTestServer({ env: ENV, providers: counted.providers });
    const user = await s.user({ gems: 500 });
    const before = (await ledger.accountSummary(s.db, systemClock, user.accountId, [])).balance;
    diskFaults.write = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const ids = await submitDuringOutage(s, user.secret, 2, counted.calls);
    diskFaults.write = undefined;
    await assertAllSucceededOnce(s, user, ids, before);
    assert.equal(counted.calls(), 2, 'each output generated once');
  });

  it(
    'when the generator cannot write its output to a full disk, then its partial file is removed, the job waits for space and the task succeeds',
    { skip: fs.existsSync('/dev/full') ? false : 'needs /dev/full' },
    async () => {
      let full = true;
      const provider = fullDiskProviders(() => full);
      s = await startTestServer({ env: ENV, providers: provider.providers });
      const user = await s.user({ gems: 500 });
      const before = (await ledger.accountSummary(s.db, systemClock, user.accountId, [])).balance;
      const r = await submit(s, user.secret, '/api/generate/image', {
        model: 'gemforge-image-1',
        prompt: 'a fox on a full disk',
        parameters: { resolution: '512' },
      });
      assert.equal(r.status, 202);
      await until('the job handed back after the full disk', async () => ((await findJobByTask(s!.db, r.body.task.id))?.store_retries ?? 0) >= 1);
      assert.notEqual(await waitForTaskStatus(s, user.secret, r.body.task.id), 'failed');
      assert.ok(provider.links.length >= 1);
      for (const link of provider.links) assert.equal(fs.existsSync(link) || isLink(link), false, `the generator's partial file ${link} was removed`);
      full = false;
      await assertAllSucceededOnce(s, user, [r.body.task.id], before);
    },
  );
});

async function waitForTaskStatus(s: TestServer, key: string, id: string): Promise<string> {
  const res = await s.call('GET', `/api/generate/tasks/${id}`, { key });
  return ((await res.json()) as { task: { status: string } }).task.status;
}

function isLink(file: string): boolean {
  try {
    return fs.lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}
