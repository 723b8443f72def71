/**
 * Exactly-once and durability of media submissions at the real server: a race
 * of one identity, a SIGKILL while tasks process, an interrupted task whose
 * provider cannot resume, and the worker as its own process. Then fairness
 * after a crash: a re-queued job keeps its place, backs off, fails after
 * max_attempts with its reservation released, and a worker that lost its lease
 * settles nothing.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { startTestServer, tempDataDir } from './helpers/server.ts';
import { seedUserOnDisk as seedUser, startServerChild } from './helpers/child.ts';
import { assertSettled, newKey, type TaskBody } from './helpers/tasks.ts';
import { assertOneIdentityRace } from './helpers/exactly-once.ts';
import { openDb } from '../server/storage/db.ts';
import { dbEnvFor, dbOptionsFor } from './helpers/database.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { systemClock } from '../server/domain/clock.ts';
import { claimNext } from '../server/storage/jobs.ts';
import * as jobs from '../server/storage/jobs.ts';
import { recoverExpiredLeases, retryBackoffMs, startWorker } from '../server/worker/worker.ts';
import type { MediaProvider } from '../server/providers/media-types.ts';
import fsp from 'node:fs/promises';
import sharp from 'sharp';
import { createLogger } from '../server/logger.ts';
import type { ManualClock } from './helpers/db.ts';
import { expireLeases, queueTask, withQueue } from './helpers/jobs.ts';
import { until } from './helpers/poll.ts';
import { capturedLogger } from './helpers/logs.ts';
import type { Db } from '../server/storage/db.ts';

const IMAGE = '/api/generate/image';
const ROOT = path.resolve(import.meta.dirname, '..');

async function post(url: string, key: string, idemKey: string, body: unknown) {
  const res = await fetch(`${url}${IMAGE}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idemKey },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function getTask(url: string, key: string, id: string): Promise<TaskBody> {
  const res = await fetch(`${url}/api/generate/tasks/${id}`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { task: TaskBody }).task;
}

describe('media durability', () => {
  it('when 120 submissions with one identity arrive at once, then one task and one reservation exist and the rest replay or answer REQUEST_UNCERTAIN', async () => {
    const s = await startTestServer();
    try {
      const user = await s.user({ gems: 1000 });
      const body = { model: 'gemforge-image-1', prompt: 'one of a kind', parameters: { resolution: '512' } };
      const race = await assertOneIdentityRace(s.db, {
        url: s.url,
        path: IMAGE,
        key: user.secret,
        idemKey: newKey('race'),
        body,
        accountId: user.accountId,
        n: 120,
      });
      assert.equal(race.statuses[202], 1, 'one submission created the task');
      const ids = new Set(race.bodies.filter((r) => r.status !== 409).map((r) => (r.body as { task: { id: string } }).task.id));
      assert.equal(ids.size, 1, 'every replay shows the same task');
      assert.equal((await s.db('tasks').where({ account_id: user.accountId })).length, 1);
      assert.equal(await ledger.balanceOf(s.db, user.accountId), 998);
    } finally {
      await s.close();
    }
  });

  it('when two workers claim from one queue at once, then every job goes to exactly one of them', async () => {
    const dir = tempDataDir();
    const a = await openDb(await dbOptionsFor(dir));
    const b = await openDb(await dbOptionsFor(dir));
    try {
      const now = new Date().toISOString();
      const acct = await accounts.createAccount(a, systemClock, { name: 'q' });
      await ledger.credit(a, systemClock, acct.id, 100, 'g');
      const { key } = await accounts.createKey(a, systemClock, 'gf', { accountId: acct.id, name: 'k', scopes: ['generate'] });
      for (let i = 0; i < 30; i++) {
        const r = await ledger.reserve(a, systemClock, { accountId: acct.id, keyId: key.id, purpose: 'media', amount: 1 });
        await a('tasks').insert({
          id: `task_q${i}`,
          account_id: acct.id,
          key_id: key.id,
          kind: 'image',
          model: 'm',
          request: '{}',
          status: 'queued',
          reservation_id: r.id,
          created_at: now,
          updated_at: now,
        });
        await a('jobs').insert({ task_id: `task_q${i}`, state: 'queued', attempts: 0, run_at: now, created_at: now, updated_at: now });
      }
      const claimed: string[] = [];
      const drain = async (db: typeof a, id: string) => {
        for (;;) {
          const job = await claimNext(db, id, new Date().toISOString());
          if (!job) return;
          claimed.push(job.task_id);
        }
      };
      await Promise.all([drain(a, 'w1'), drain(b, 'w2'), drain(a, 'w3'), drain(b, 'w4')]);
      assert.equal(claimed.length, 30);
      assert.equal(new Set(claimed).size, 30);
    } finally {
      await a.destroy();
      await b.destroy();
    }
  });

  it('when the server is SIGKILLed while tasks process, then after a restart every task finishes once, nothing is charged twice and ledger verify passes', async () => {
    const dataDir = tempDataDir();
    const env = { DATA_DIR: dataDir, WORKER_LEASE_MS: '1000', WORKER_POLL_MS: '50', WORKER_CONCURRENCY: '2' };
    const user = await seedUser(dataDir);
    let child = await startServerChild(env);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await post(child.url, user.secret, newKey('crash'), {
        model: 'gemforge-image-1',
        prompt: `crash ${i} [[scenario:processing:2]]`,
        parameters: { resolution: '512' },
      });
      assert.equal(r.status, 202);
      ids.push(r.body.task.id);
    }
    const heldKey = newKey('held');
    const unresumable = await post(child.url, user.secret, heldKey, {
      model: 'gemforge-image-1',
      prompt: 'fragile [[scenario:unresumable:30]]',
      parameters: { resolution: '512' },
    });
    await until('tasks processing', async () => ((await getTask(child.url, user.secret, ids[0])).status === 'processing' ? true : undefined));
    await until('the fragile task processing', async () =>
      (await getTask(child.url, user.secret, unresumable.body.task.id)).status === 'processing' ? true : undefined,
    );
    await child.kill('SIGKILL');
    assert.ok((await expireLeases(dataDir)) >= 1, 'the killed worker held leases');

    child = await startServerChild(env);
    try {
      for (const id of ids) {
        const task = await until(`task ${id}`, async () => {
          const t = await getTask(child.url, user.secret, id);
          return ['succeeded', 'partial', 'failed', 'cancelled'].includes(t.status) ? t : undefined;
        });
        assert.equal(task.status, 'succeeded');
        assertSettled(task);
        assert.equal(task.chargedGems, 2);
      }
      // The fragile task's provider cannot resume: its job is held for an operator, the task stays processing with its reservation held.
      const watch = await openDb(await dbOptionsFor(dataDir));
      try {
        await until('the fragile job held', async () => (await jobs.findJobByTask(watch, unresumable.body.task.id))?.state === 'held');
      } finally {
        await watch.destroy();
      }
      const held = await getTask(child.url, user.secret, unresumable.body.task.id);
      assert.equal(held.status, 'processing');
      const replay = await post(child.url, user.secret, heldKey, {
        model: 'gemforge-image-1',
        prompt: 'fragile [[scenario:unresumable:30]]',
        parameters: { resolution: '512' },
      });
      assert.equal(replay.status, 200, 'a replay returns the durable run');
      assert.equal(replay.body.task.id, held.id);

      // Async, so the test process keeps its connections alive meanwhile.
      await promisify(execFile)(process.execPath, [path.join(ROOT, 'scripts/gemforge.mjs'), 'admin', 'task', 'settle', held.id, '--failed'], {
        env: { ...process.env, ...(await dbEnvFor(dataDir)) },
      });
      const settled = await getTask(child.url, user.secret, held.id);
      assert.equal(settled.status, 'failed');
      assertSettled(settled);
      assert.equal(settled.releasedGems, 2);
    } finally {
      await child.kill('SIGTERM');
    }
    const db = await openDb(await dbOptionsFor(dataDir));
    try {
      const report = await verifyLedger(db, [verifyTasks]);
      assert.deepEqual(report.problems, []);
      const posts = await db('ledger_entries').where({ account_id: user.accountId, type: 'post' });
      assert.equal(posts.length, 3, 'each finished task was charged exactly once');
      assert.equal(await ledger.balanceOf(db, user.accountId), 500 - 6);
    } finally {
      await db.destroy();
    }
  });

  it('when the worker runs as its own process (gemforge worker), then a server without an in-process worker still finishes tasks', async () => {
    const dataDir = tempDataDir();
    const user = await seedUser(dataDir);
    const server = await startServerChild({ DATA_DIR: dataDir, WORKER_ENABLED: 'false' });
    const worker = spawn(process.execPath, [path.join(ROOT, 'scripts/gemforge.mjs'), 'worker'], {
      env: { ...process.env, ...(await dbEnvFor(dataDir)), WORKER_POLL_MS: '50', LOG_LEVEL: 'warn' },
      stdio: 'ignore',
    });
    try {
      const r = await post(server.url, user.secret, newKey('ext'), { model: 'gemforge-image-1', prompt: 'external worker', parameters: { resolution: '512' } });
      const task = await until('external worker', async () => {
        const t = await getTask(server.url, user.secret, r.body.task.id);
        return t.status === 'succeeded' ? t : undefined;
      });
      assertSettled(task);
    } finally {
      worker.kill('SIGTERM');
      await server.kill('SIGTERM');
    }
  });

  it('when a worker is SIGKILLed with a backlog queued, then after a restart the interrupted task finishes before the backlog', async () => {
    const dataDir = tempDataDir();
    const env = { DATA_DIR: dataDir, WORKER_LEASE_MS: '1000', WORKER_POLL_MS: '50', WORKER_CONCURRENCY: '1', WORKER_RETRY_BACKOFF_MS: '0' };
    const user = await seedUser(dataDir);
    let child = await startServerChild(env);
    const body = (prompt: string) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });
    const first = await post(child.url, user.secret, newKey('fair'), body('first in line [[scenario:processing:3]]'));
    await until('the first task processing', async () =>
      (await getTask(child.url, user.secret, first.body.task.id)).status === 'processing' ? true : undefined,
    );
    const backlog: string[] = [];
    for (let i = 0; i < 4; i++) backlog.push((await post(child.url, user.secret, newKey('fair'), body(`backlog ${i}`))).body.task.id);
    await child.kill('SIGKILL');
    assert.equal(await expireLeases(dataDir), 1, 'the lease runs out while nothing runs');

    child = await startServerChild(env);
    try {
      for (const id of [first.body.task.id, ...backlog]) {
        await until(`task ${id}`, async () => ((await getTask(child.url, user.secret, id)).status === 'succeeded' ? true : undefined), 60_000);
      }
    } finally {
      await child.kill('SIGTERM');
    }
    const db = await openDb(await dbOptionsFor(dataDir));
    try {
      const rows = await db('tasks')
        .whereIn('id', [first.body.task.id, ...backlog])
        .select('id', 'finished_at');
      const finished = new Map(rows.map((r: { id: string; finished_at: string }) => [r.id, r.finished_at]));
      for (const id of backlog)
        assert.ok(finished.get(first.body.task.id)! < finished.get(id)!, 'the interrupted task kept its place at the head of the queue');
      const job = await jobs.findJobByTask(db, first.body.task.id);
      assert.equal(job?.attempts, 2);
      assert.match(job?.last_error ?? '', /interrupted after attempt 1 of 3/);
      assert.deepEqual((await verifyLedger(db, [verifyTasks])).problems, []);
    } finally {
      await db.destroy();
    }
  });
});

describe('job recovery after a crash', () => {
  const LEASE = 1000;
  const logger = createLogger('silent');
  const providers = {} as Parameters<typeof recoverExpiredLeases>[0]['providers'];
  /** The maintenance pass of a worker, with this test's lease and a backoff of `retryBackoffMs`. */
  const recover = (db: Db, clock: ManualClock, retryBackoffMs: number) =>
    recoverExpiredLeases({ db, clock, logger, providers, leaseMs: LEASE, retryBackoffMs });

  it('when a job is re-queued after its worker died, then it keeps its place ahead of newer jobs and waits out its backoff', () =>
    withQueue(async ({ db, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_old');
      clock.advance(10);
      assert.equal((await claimNext(db, 'dead-worker', clock.now().toISOString()))?.task_id, 'task_old');
      for (let i = 0; i < 3; i++) {
        clock.advance(10);
        await queueTask(db, clock, owner, `task_new${i}`);
      }
      clock.advance(LEASE + 1);
      await recover(db, clock, 500);
      const requeued = (await jobs.findJobByTask(db, 'task_old'))!;
      assert.equal(requeued.state, 'queued');
      assert.equal(requeued.run_at, '2026-01-01T00:00:00.000Z', 'run_at is the original one');
      assert.match(requeued.last_error ?? '', /interrupted after attempt 1 of 3.*dead-worker/);
      // During the backoff the newer jobs go; after it, the old one is next, ahead of the rest.
      assert.equal((await claimNext(db, 'w', clock.now().toISOString()))?.task_id, 'task_new0');
      clock.advance(500);
      assert.equal((await claimNext(db, 'w', clock.now().toISOString()))?.task_id, 'task_old');
      assert.equal((await claimNext(db, 'w', clock.now().toISOString()))?.task_id, 'task_new1');
    }));

  it('when a job kills its worker on every attempt, then after max_attempts it ends failed, its task failed and its reservation released', () =>
    withQueue(async ({ db, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_crasher');
      for (let attempt = 1; attempt <= 3; attempt++) {
        const job = await claimNext(db, `worker-${attempt}`, clock.now().toISOString());
        assert.equal(job?.attempts, attempt);
        clock.advance(LEASE + 1); // the worker died: no heartbeat
        await recover(db, clock, 100);
        clock.advance(retryBackoffMs(attempt, 100));
      }
      const job = (await jobs.findJobByTask(db, 'task_crasher'))!;
      assert.equal(job.state, 'failed');
      assert.match(job.last_error ?? '', /attempt 3 of 3/);
      const task = (await db('tasks').where({ id: 'task_crasher' }).first()) as { status: string; error_code: string };
      assert.equal(task.status, 'failed');
      assert.equal(task.error_code, 'GENERATION_FAILED');
      assert.equal(await claimNext(db, 'w', clock.now().toISOString()), undefined, 'it is not claimed again');
      assert.equal(await ledger.balanceOf(db, owner.accountId), 100, 'the reservation was released');
      assert.deepEqual((await verifyLedger(db, [verifyTasks])).problems, []);
    }));

  it('when a worker lost its lease to another, then its heartbeat and finish are refused and only the new owner can finish', () =>
    withQueue(async ({ db, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_contended');
      const stale = (await claimNext(db, 'w-stale', clock.now().toISOString()))!;
      clock.advance(LEASE + 1);
      await recover(db, clock, 0);
      const fresh = (await claimNext(db, 'w-fresh', clock.now().toISOString()))!;
      assert.equal(fresh.id, stale.id);
      const now = clock.now().toISOString();
      assert.equal(await jobs.heartbeat(db, stale.id, 'w-stale', now), false);
      assert.equal(await jobs.finish(db, stale.id, 'w-stale', now), false);
      assert.equal(await jobs.finish(db, fresh.id, 'w-fresh', now), true);
    }));

  it('when a job is taken over while its output is being made, then the first worker stores no output for it, even before a heartbeat notices', () =>
    withQueue(async ({ db, dir, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_taken');
      const provider: MediaProvider = {
        name: 'takeover',
        resume: 'rerun',
        async generate(_job, tools) {
          await db('jobs').where({ task_id: 'task_taken' }).update({ locked_by: 'thief' }); // recovered and claimed elsewhere, between two heartbeats
          const file = await tools.tempFile('.png');
          await fsp.writeFile(
            file,
            await sharp({ create: { width: 8, height: 8, channels: 3, background: '#808080' } })
              .png()
              .toBuffer(),
          );
          return { file, mimeType: 'image/png' };
        },
      };
      const log = capturedLogger('warn');
      const worker = startWorker({
        db,
        clock,
        logger: log.logger,
        providers: { image: provider },
        dataDir: dir,
        ffmpegPath: '',
        ffprobePath: '',
        outputRetentionSeconds: 60,
        concurrency: 1,
        leaseMs: 60_000,
        pollMs: 20,
        retryBackoffMs: 0,
      });
      try {
        await until('the worker discards its result', () => log.lines.some((l) => /is no longer this worker's; its result was discarded/.test(l)), 10_000);
      } finally {
        await worker.stop();
      }
      const outputs = (await db('task_outputs').where({ task_id: 'task_taken' })) as Array<{ status: string; asset_id: string | null }>;
      assert.ok(
        outputs.every((o) => o.status !== 'succeeded' && o.asset_id === null),
        'no output written for a job that is no longer ours',
      );
      assert.equal((await db('assets').where({ task_id: 'task_taken' })).length, 0);
      assert.equal((await jobs.findJobByTask(db, 'task_taken'))!.locked_by, 'thief');
    }));

  it('when a running job is taken over by another worker, then the first worker stops its work and settles nothing', () =>
    withQueue(async ({ db, dir, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_stolen');
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const provider: MediaProvider = {
        name: 'gated',
        resume: 'rerun',
        async generate(_job, tools) {
          started();
          await gate;
          const file = await tools.tempFile('.png');
          await fsp.writeFile(
            file,
            await sharp({ create: { width: 8, height: 8, channels: 3, background: '#808080' } })
              .png()
              .toBuffer(),
          );
          return { file, mimeType: 'image/png' };
        },
      };
      const log = capturedLogger('warn');
      const worker = startWorker({
        db,
        clock,
        logger: log.logger,
        providers: { image: provider },
        dataDir: dir,
        ffmpegPath: '',
        ffprobePath: '',
        outputRetentionSeconds: 60,
        concurrency: 1,
        leaseMs: 300,
        pollMs: 20,
        retryBackoffMs: 0,
      });
      try {
        await running;
        await db('jobs').where({ task_id: 'task_stolen' }).update({ locked_by: 'thief' }); // recovered and claimed elsewhere
        await until('a heartbeat finds the job taken', () => log.lines.some((l) => /lease lost; stopping the work on this job/.test(l)), 10_000);
        release();
      } finally {
        release();
        await worker.stop(); // waits for the job's run to end
      }
      const job = (await jobs.findJobByTask(db, 'task_stolen'))!;
      assert.equal(job.state, 'running');
      assert.equal(job.locked_by, 'thief', "the job stays the new owner's");
      const task = (await db('tasks').where({ id: 'task_stolen' }).first()) as { status: string };
      assert.equal(task.status, 'processing', 'the first worker did not settle it');
      const output = (await db('task_outputs').where({ task_id: 'task_stolen' }).first()) as { status: string; asset_id: string | null };
      assert.notEqual(output.status, 'succeeded');
      assert.equal(output.asset_id, null);
      assert.equal(await ledger.balanceOf(db, owner.accountId), 99, 'the reservation is still held for the new owner');
    }));

  it('when the backoff grows with the attempts, then it doubles and stops at a minute', () => {
    assert.deepEqual(
      [1, 2, 3, 4].map((a) => retryBackoffMs(a, 1000)),
      [1000, 2000, 4000, 8000],
    );
    assert.equal(retryBackoffMs(20, 1000), 60_000);
  });
});
