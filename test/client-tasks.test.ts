/**
 * waitForTask at the real server with an injected short schedule: a task held
 * in processing (`[[scenario:processing:3]]`) reaches succeeded; a wait shorter
 * than the task throws TaskWaitTimeout with the task ID; an abort stops the
 * wait. Nothing is ever resubmitted: only task reads are sent.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createGemforgeClient, type GemforgeClient } from '../client/client.ts';
import { TaskWaitAborted, TaskWaitTimeout, type TaskProgress } from '../client/tasks.ts';

describe('waiting for tasks', () => {
  let s: TestServer;
  let gf: GemforgeClient;
  const methods: string[] = [];
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    const secret = (await s.user({ gems: 10_000 })).secret;
    gf = createGemforgeClient({
      baseUrl: s.url,
      apiKey: secret,
      fetch: (input, init) => {
        const request = new Request(input, init);
        methods.push(`${request.method} ${new URL(request.url).pathname.replace(/task_\w+/, ':id')}`);
        return fetch(request);
      },
    });
  });
  after(() => s.close());

  it('when a task is processing for 3 s, then polling on a short schedule reports progress and returns the succeeded task', async () => {
    const sub = await gf.images.create({ model: 'gemforge-image-1', prompt: 'slow fox [[scenario:processing:3]]', parameters: { resolution: '512' } });
    methods.length = 0;
    const seen: TaskProgress[] = [];
    const task = await gf.tasks.wait(sub.data.task.id, { scheduleMs: [100, 200, 400], jitter: 0, onProgress: (p) => seen.push(p) });
    assert.equal(task.status, 'succeeded');
    assert.equal(task.outputs[0].status, 'succeeded');
    assert.ok(seen.some((p) => p.task.status === 'processing'));
    assert.equal(seen.at(-1)!.task.status, 'succeeded');
    assert.ok(seen.at(-1)!.elapsedMs >= 2500, `elapsed ${seen.at(-1)!.elapsedMs}`);
    assert.ok(seen.length >= 6 && seen.length <= 20, `${seen.length} polls on 100, 200, then 400 ms`);
    assert.deepEqual([...new Set(methods)], ['GET /api/generate/tasks/:id'], 'only reads; never a resubmission');
  });

  it('when the wait is shorter than the task, then TaskWaitTimeout keeps the task ID and the last snapshot', async () => {
    const sub = await gf.images.create({ model: 'gemforge-image-1', prompt: 'slower fox [[scenario:processing:30]]', parameters: { resolution: '512' } });
    methods.length = 0;
    const started = Date.now();
    const error = await gf.tasks.wait(sub.data.task.id, { scheduleMs: [50], maxWaitMs: 400 }).catch((e: unknown) => e);
    assert.ok(error instanceof TaskWaitTimeout);
    assert.equal(error.taskId, sub.data.task.id);
    assert.ok(['queued', 'processing'].includes(error.lastTask!.status));
    assert.match(error.message, new RegExp(sub.data.task.id));
    // The task takes 30 s: a wait that ignored its 400 ms bound would last that long; a loaded runner is slow, not that slow.
    assert.ok(Date.now() - started < 20_000, 'the bound is kept');
    assert.deepEqual([...new Set(methods)], ['GET /api/generate/tasks/:id']);

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 150);
    const aborted = await gf.tasks.wait(sub.data.task.id, { scheduleMs: [50], signal: controller.signal }).catch((e: unknown) => e);
    assert.ok(aborted instanceof TaskWaitAborted);
    assert.equal(aborted.taskId, sub.data.task.id);
  });

  it('when a task fails, then waiting stops at the terminal status with the sanitized error', async () => {
    const sub = await gf.images.create({ model: 'gemforge-image-1', prompt: 'doomed fox [[scenario:fail]]', parameters: { resolution: '512' } });
    const task = await gf.tasks.wait(sub.data.task.id, { scheduleMs: [50] });
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'GENERATION_FAILED');
  });
});
