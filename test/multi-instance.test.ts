/**
 * Leaving one machine: Postgres plus a local S3 server
 * (s3rver), two API processes with their own data directories and two worker
 * processes, sharing nothing on disk. 1,000 racing submissions over 50
 * identities through both APIs make exactly 50 tasks; every output downloads
 * from both APIs; an asset uploaded through one is used through the other; a
 * worker SIGKILLed under a backlog leaves every task finished once; the ledger
 * verifies. Needs Postgres: runs in `npm run test:postgres` (CI), skipped under
 * SQLite, where instances cannot share a database.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { startServerChild, type ServerChild } from './helpers/child.ts';
import { tempDataDir } from './helpers/server.ts';
import { startLocalS3 } from './helpers/s3.ts';
import { databaseUrlFor } from './helpers/database.ts';
import { image as imageFixture } from './helpers/media.ts';
import { assertSettled, type TaskBody } from './helpers/tasks.ts';
import { until } from './helpers/poll.ts';
import { openDb } from '../server/storage/db.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'scripts/gemforge.mjs');
const IMAGE = '/api/generate/image';

async function post(base: string, secret: string, idemKey: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${IMAGE}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': idemKey },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function taskOf(base: string, secret: string, id: string): Promise<TaskBody> {
  const res = await fetch(`${base}/api/generate/tasks/${id}`, { headers: { authorization: `Bearer ${secret}` } });
  return ((await res.json()) as { task: TaskBody }).task;
}

async function finished(base: string, secret: string, ids: string[], timeoutMs = 120_000): Promise<TaskBody[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const tasks = await Promise.all(ids.map((id) => taskOf(base, secret, id)));
    if (tasks.every((t) => ['succeeded', 'partial', 'failed', 'cancelled'].includes(t.status))) return tasks;
    if (Date.now() > end) throw new Error(`${tasks.filter((t) => t.status === 'queued' || t.status === 'processing').length} tasks still open`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function startWorker(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [BIN, 'worker'], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

describe('several instances on one database and one bucket', () => {
  it(
    'when two APIs and two workers share only Postgres and S3, then submissions, uploads and outputs work through either, exactly once, and a killed worker loses nothing',
    { skip: process.env.TEST_DATABASE_URL ? false : 'needs Postgres (npm run test:postgres)', timeout: 300_000 },
    async () => {
      const s3 = await startLocalS3('multi');
      const dirs = [tempDataDir(), tempDataDir(), tempDataDir(), tempDataDir()];
      const database = (await databaseUrlFor(dirs[0]!))!;
      // One account's backlog must spread over both workers: without this, the fair-share cap on an
      // account's running jobs (2 by default) can let one worker take all it may run, the other idle.
      const shared = {
        ...s3.env,
        DATABASE_URL: database,
        SIGNING_SECRET: 'd'.repeat(64),
        WORKER_LEASE_MS: '1500',
        WORKER_POLL_MS: '50',
        WORKER_RETRY_BACKOFF_MS: '0',
        ACCOUNT_LOCAL_CONCURRENCY: '0',
      };
      // The schema and an account, made through the first API's start.
      const apis: ServerChild[] = [];
      const workers: ChildProcess[] = [];
      try {
        apis.push(await startServerChild({ ...shared, DATA_DIR: dirs[0]!, WORKER_ENABLED: 'false' }));
        apis.push(await startServerChild({ ...shared, DATA_DIR: dirs[1]!, WORKER_ENABLED: 'false' }));
        const db = await openDb({ dataDir: dirs[0]!, databaseUrl: database });
        let accountId: string;
        let secret: string;
        try {
          const a = await accounts.createAccount(db, systemClock, { name: 'multi' });
          await ledger.credit(db, systemClock, a.id, 100_000, 'grant');
          secret = (await accounts.createKey(db, systemClock, 'gf', { accountId: a.id, name: 'k', scopes: ['read', 'generate'] })).secret;
          accountId = a.id;
        } finally {
          await db.destroy();
        }
        workers.push(startWorker({ ...shared, DATA_DIR: dirs[2]! }), startWorker({ ...shared, DATA_DIR: dirs[3]! }));

        // 1,000 racing submissions over 50 identities, alternating between the APIs.
        const body = (i: number) => ({ model: 'gemforge-image-1', prompt: `identity ${i}`, parameters: { resolution: '512' } });
        const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => post(apis[i % 2]!.url, secret, `race-${i % 50}`, body(i % 50))));
        const byIdentity = new Map<number, Set<string>>();
        results.forEach((r, i) => {
          assert.ok(
            [200, 202].includes(r.status) || (r.status === 409 && r.body.error.code === 'REQUEST_UNCERTAIN'),
            `${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
          );
          if (r.body.task) byIdentity.set(i % 50, (byIdentity.get(i % 50) ?? new Set()).add(r.body.task.id));
        });
        assert.equal(byIdentity.size, 50);
        for (const ids of byIdentity.values()) assert.equal(ids.size, 1, 'one task per identity');
        const ids = [...byIdentity.values()].map((set) => [...set][0]!);
        const tasks = await finished(apis[0]!.url, secret, ids);
        for (const t of tasks) {
          assert.equal(t.status, 'succeeded');
          assertSettled(t);
          const url = new URL(t.outputs[0]!.asset!.url);
          for (const api of apis) {
            const res = await fetch(`${api.url}${url.pathname}${url.search}`);
            assert.equal(res.status, 200, `output of ${t.id} from ${api.url}`);
            await res.arrayBuffer();
          }
        }

        // An asset uploaded through one API is referenced through the other.
        const up = await fetch(`${apis[1]!.url}/api/generate/assets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'image/png', 'x-filename': 'source.png' },
          body: fs.readFileSync(await imageFixture('png', 64, 48)),
        });
        assert.equal(up.status, 201, await up.clone().text());
        const assetId = ((await up.json()) as { asset: { id: string } }).asset.id;
        const edit = await post(apis[0]!.url, secret, 'edit-1', {
          model: 'gemforge-image-1',
          prompt: 'edit',
          parameters: { resolution: '512', sourceImage: assetId },
        });
        assert.equal(edit.status, 202, JSON.stringify(edit.body));
        assert.equal((await finished(apis[0]!.url, secret, [edit.body.task.id]))[0]!.status, 'succeeded');

        // A backlog, and one worker killed outright while it works.
        const backlog = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            post(apis[i % 2]!.url, secret, `backlog-${i}`, {
              model: 'gemforge-image-1',
              prompt: `backlog ${i} [[scenario:processing:1]]`,
              parameters: { resolution: '512' },
            }),
          ),
        );
        // Kill once both workers hold backlog jobs, so the killed one surely leaves work behind.
        const watch = await openDb({ dataDir: dirs[0]!, databaseUrl: database });
        try {
          await until(
            'both workers running backlog jobs',
            async () => new Set((await watch('jobs').where({ state: 'running' }).select('locked_by')).map((j: { locked_by: string }) => j.locked_by)).size >= 2,
            30_000,
          );
        } finally {
          await watch.destroy();
        }
        workers[0]!.kill('SIGKILL');
        const done = await finished(
          apis[1]!.url,
          secret,
          backlog.map((r) => r.body.task.id as string),
        );
        for (const t of done) {
          assert.equal(t.status, 'succeeded');
          assertSettled(t);
        }
        const verify = await promisify(execFile)(process.execPath, [BIN, 'admin', 'ledger', 'verify'], {
          env: { ...process.env, DATA_DIR: dirs[0]!, DATABASE_URL: database },
        });
        assert.equal(JSON.parse(verify.stdout).ok, true, verify.stdout);
        const check = await openDb({ dataDir: dirs[0]!, databaseUrl: database });
        try {
          const posts = await check('ledger_entries').where({ account_id: accountId, type: 'post' });
          assert.equal(posts.length, 50 + 1 + 16, 'each task charged exactly once');
        } finally {
          await check.destroy();
        }
      } finally {
        for (const w of workers) w.kill('SIGTERM');
        for (const api of apis) await api.kill('SIGTERM');
        await s3.close();
        for (const d of dirs.slice(1)) fs.rmSync(d, { recursive: true, force: true });
      }
    },
  );
});
