/**
 * A stopping worker (SIGTERM, or the server closing) leaves its running jobs at
 * once: handed back to the queue in their place without
 * spending an attempt, or held for an operator when their provider cannot
 * resume them — never left to wait out the lease.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { assertSettled, submit, waitForTask } from './helpers/tasks.ts';
import { until } from './helpers/poll.ts';

async function processing(s: TestServer, key: string, id: string): Promise<void> {
  await until(
    'the task to start',
    async () => {
      const res = await s.call('GET', `/api/generate/tasks/${id}`, { key });
      return ((await res.json()) as { task: { status: string } }).task.status === 'processing';
    },
    15_000,
  );
}

describe('a stopping worker', () => {
  it('when the server stops while a job runs, then the job is handed back at once without spending an attempt, and the next start finishes it', async () => {
    const dir = tempDataDir();
    const env = { WORKER_POLL_MS: '20', WORKER_LEASE_MS: '60000' };
    const first = await startTestServer({ dataDir: dir, env });
    const u = await first.user({ gems: 100 });
    const r = await submit(first, u.secret, '/api/generate/image', {
      model: 'gemforge-image-1',
      prompt: 'slow fox [[scenario:processing:30]]',
      parameters: { resolution: '512' },
    });
    const id = r.body.task.id as string;
    await processing(first, u.secret, id);
    // The job takes 30 s: a stop that waited for it would leave it done, not queued (asserted below).
    await first.close();
    const second = await startTestServer({ dataDir: dir, env });
    try {
      const job = await second.db('jobs').where({ task_id: id }).first();
      assert.equal(job.state, 'queued', 'handed back, not left running until its lease expires');
      assert.equal(job.attempts, 0, 'no attempt spent');
      assert.match(job.last_error, /handed back/);
      const task = await waitForTask(second, u.secret, id, 60_000);
      assert.equal(task.status, 'succeeded');
      assertSettled(task);
      assert.equal((await second.db('jobs').where({ task_id: id }).first()).attempts, 1);
    } finally {
      await second.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when the server stops while a job runs whose provider cannot resume it, then the job is held for an operator at once', async () => {
    const dir = tempDataDir();
    const s = await startTestServer({ dataDir: dir, env: { WORKER_POLL_MS: '20', WORKER_LEASE_MS: '60000' } });
    const u = await s.user({ gems: 100 });
    const r = await submit(s, u.secret, '/api/generate/image', {
      model: 'gemforge-image-1',
      prompt: 'fragile [[scenario:unresumable:30]]',
      parameters: { resolution: '512' },
    });
    const id = r.body.task.id as string;
    await processing(s, u.secret, id);
    await s.close();
    const look = await startTestServer({ dataDir: dir, env: { WORKER_ENABLED: 'false' } });
    try {
      const job = await look.db('jobs').where({ task_id: id }).first();
      assert.equal(job.state, 'held');
      assert.match(job.last_error, /cannot resume it safely/);
      const res = await look.call('GET', `/api/generate/tasks/${id}`, { key: u.secret });
      assert.equal(((await res.json()) as { task: { status: string } }).task.status, 'processing', 'its reservation stays held for the operator');
    } finally {
      await look.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
