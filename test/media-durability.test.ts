/**
 * Exactly-once and durability of media submissions at the real server: a race
 * of one identity, a SIGKILL while tasks process, an interrupted task whose
 * provider cannot resume, and the worker as its own process.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { startTestServer, tempDataDir } from './helpers/server.ts';
import { startServerChild } from './helpers/child.ts';
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

const IMAGE = '/api/generate/image';
const ROOT = path.resolve(import.meta.dirname, '..');

async function post(url: string, key: string, idemKey: string, body: unknown) {
  const res = await fetch(`${url}${IMAGE}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idemKey }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

async function getTask(url: string, key: string, id: string): Promise<TaskBody> {
  const res = await fetch(`${url}/api/generate/tasks/${id}`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { task: TaskBody }).task;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An account with Gems and a key, made directly in the data dir the child uses. */
async function seedUser(dataDir: string): Promise<{ accountId: string; secret: string }> {
  const db = await openDb(await dbOptionsFor(dataDir));
  try {
    const a = await accounts.createAccount(db, systemClock, { name: 'durability' });
    await ledger.credit(db, systemClock, a.id, 500, 'grant');
    const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: a.id, name: 'k', scopes: ['read', 'generate'] });
    return { accountId: a.id, secret };
  } finally {
    await db.destroy();
  }
}

describe('media durability', () => {
  it('when 120 submissions with one identity arrive at once, then one task and one reservation exist and the rest replay or answer REQUEST_UNCERTAIN', async () => {
    const s = await startTestServer();
    try {
      const user = await s.user({ gems: 1000 });
      const body = { model: 'gemforge-image-1', prompt: 'one of a kind', parameters: { resolution: '512' } };
      const race = await assertOneIdentityRace(s.db, { url: s.url, path: IMAGE, key: user.secret, idemKey: newKey('race'), body, accountId: user.accountId, n: 120 });
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
        await a('tasks').insert({ id: `task_q${i}`, account_id: acct.id, key_id: key.id, kind: 'image', model: 'm', request: '{}', status: 'queued', reservation_id: r.id, created_at: now, updated_at: now });
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
      const r = await post(child.url, user.secret, newKey('crash'), { model: 'gemforge-image-1', prompt: `crash ${i} [[scenario:processing:2]]`, parameters: { resolution: '512' } });
      assert.equal(r.status, 202);
      ids.push(r.body.task.id);
    }
    const heldKey = newKey('held');
    const unresumable = await post(child.url, user.secret, heldKey, { model: 'gemforge-image-1', prompt: 'fragile [[scenario:unresumable:30]]', parameters: { resolution: '512' } });
    await until('tasks processing', async () => ((await getTask(child.url, user.secret, ids[0])).status === 'processing' ? true : undefined));
    await until('the fragile task processing', async () => ((await getTask(child.url, user.secret, unresumable.body.task.id)).status === 'processing' ? true : undefined));
    await child.kill('SIGKILL');

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
      // The fragile task's provider cannot resume: it stays processing with its reservation held.
      await new Promise((r) => setTimeout(r, 2500));
      const held = await getTask(child.url, user.secret, unresumable.body.task.id);
      assert.equal(held.status, 'processing');
      const replay = await post(child.url, user.secret, heldKey, { model: 'gemforge-image-1', prompt: 'fragile [[scenario:unresumable:30]]', parameters: { resolution: '512' } });
      assert.equal(replay.status, 200, 'a replay returns the durable run');
      assert.equal(replay.body.task.id, held.id);

      // Async, so the test process keeps its connections alive meanwhile.
      await promisify(execFile)(process.execPath, [path.join(ROOT, 'scripts/gemforge.mjs'), 'admin', 'task', 'settle', held.id, '--failed'], { env: { ...process.env, ...(await dbEnvFor(dataDir)) } });
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
});
