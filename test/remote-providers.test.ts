/**
 * Remote media providers at the real server, against local fake
 * upstreams that speak each provider's documented wire shape
 * (test/helpers/fake-upstreams.ts): an OpenAI-compatible Images API, OpenAI
 * speech, and Replicate-shaped predictions. Outputs are the upstream's bytes,
 * stored as ours; faults end as retries, sanitized failures with Gems released,
 * or a held task, never as a 5xx of the API; a SIGKILL mid-prediction leaves one
 * upstream prediction and one charge.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import sharp from 'sharp';
import YAML from 'yaml';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { seedUserOnDisk, startServerChild } from './helpers/child.ts';
import { assertSettled, download, newKey, submit, waitForTask, type TaskBody } from './helpers/tasks.ts';
import { FFPROBE, image as imageFixture } from './helpers/media.ts';
import { uploadAsset } from './helpers/uploads.ts';
import { catalogWith, LOOPBACK_FETCH, remoteCatalog, SAWYER, UPSTREAM_KEY } from './helpers/provider-harness.ts';
import {
  startFakeFal,
  startFakeOpenAiImages,
  startFakeOpenAiSpeech,
  startFakeReplicate,
  type FakeOpenAiImages,
  type FakeReplicate,
  type FakeUpstream,
} from './helpers/fake-upstreams.ts';
import { probeAv } from '../server/media/probe.ts';
import { openDb } from '../server/storage/db.ts';
import { dbOptionsFor } from './helpers/database.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { systemClock } from '../server/domain/clock.ts';
import { nearestSize } from '../server/providers/remote/openai-images.ts';
import { inputFor, outputUrl, parseReplicateEntry } from '../server/providers/remote/replicate.ts';
import { retryAfterMs } from '../server/providers/remote/http.ts';
import { mismatch } from '../server/worker/run-job.ts';
import { loadConfig } from '../server/config.ts';
import { startServer } from '../server/server.ts';
import { run } from './helpers/run.ts';
import { until } from './helpers/poll.ts';
import { expireLeases } from './helpers/jobs.ts';

const IMAGE = '/api/generate/image';
const VIDEO = '/api/generate/video';
const AUDIO = '/api/generate/audio';
const ROOT = path.resolve(import.meta.dirname, '..');

const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

/** The task's job, once it is held for an operator. */
async function heldJob(s: TestServer, taskId: string): Promise<{ state: string; last_error: string }> {
  return until(
    'the job held',
    async () => {
      const row = await s.db('jobs').where({ task_id: taskId }).first();
      return row?.state === 'held' && row;
    },
    20_000,
  );
}

/** Runs `body` against a fresh Images fake and a server whose models map to it (`models`: IMAGE_UPSTREAM_MODELS). */
async function withImageUpstream(models: string, env: Record<string, string>, body: (fake: FakeOpenAiImages, t: TestServer) => Promise<void>): Promise<void> {
  const fake = await startFakeOpenAiImages({});
  const t = await startTestServer({ env: { IMAGE_UPSTREAM_URL: fake.url, IMAGE_UPSTREAM_MODELS: models, WORKER_POLL_MS: '20', ...env } });
  try {
    await body(fake, t);
  } finally {
    await t.close();
    await fake.close();
  }
}

/** Runs `body` against a fresh Replicate fake and a server whose video and music models are its predictions. */
async function withReplicate(
  options: Parameters<typeof startFakeReplicate>[0],
  env: Record<string, string>,
  body: (fake: FakeReplicate, t: TestServer) => Promise<void>,
  catalogOf: (dir: string) => string = remoteCatalog,
): Promise<void> {
  const fake = await startFakeReplicate(options);
  const dir = tempDataDir();
  const t = await startTestServer({
    env: { ...LOOPBACK_FETCH, CATALOG_PATH: catalogOf(dir), REPLICATE_API_URL: fake.url, REPLICATE_POLL_MS: '50', WORKER_POLL_MS: '20', ...env },
  });
  try {
    await body(fake, t);
  } finally {
    await t.close();
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** As withReplicate, with the video model mapped by its own `replicate:` block. */
function withVideoMapping(
  block: Record<string, unknown>,
  env: Record<string, string>,
  body: (fake: FakeReplicate, t: TestServer) => Promise<void>,
): Promise<void> {
  const mapped = (dir: string) =>
    catalogWith(dir, {
      'gemforge-video-1': (m) => {
        m.provider = 'replicate';
        m.replicate = block;
      },
    });
  return withReplicate({ processingMs: 100 }, env, body, mapped);
}

/** Ledger charges (posts) of an account. */
async function charges(s: TestServer, accountId: string): Promise<number> {
  return (await s.db('ledger_entries').where({ account_id: accountId, type: 'post' })).length;
}

async function balanceOf(s: TestServer, accountId: string): Promise<number> {
  return ledger.balanceOf(s.db, accountId);
}

/** Polls a task until `check` holds. */
async function taskUntil(s: TestServer, key: string, id: string, check: (t: TaskBody) => boolean, timeoutMs = 20_000): Promise<TaskBody> {
  return until(
    `task ${id}`,
    async () => {
      const { task } = (await (await s.call('GET', `/api/generate/tasks/${id}`, { key })).json()) as { task: TaskBody };
      return check(task) && task;
    },
    timeoutMs,
  );
}

describe('remote providers: pure pieces', () => {
  it('when a ratio has no exact upstream size, then the nearest shape is chosen', () => {
    const gpt = ['1024x1024', '1536x1024', '1024x1536'];
    assert.equal(nearestSize(gpt, 1024, 1024), '1024x1024');
    assert.equal(nearestSize(gpt, 1024, 576), '1536x1024');
    assert.equal(nearestSize(gpt, 576, 1024), '1024x1536');
    assert.equal(nearestSize(undefined, 640, 360), '640x360');
  });

  it("when the defaults run every remote job as a prediction, then the reads stay within Replicate's 3,000 a minute", () => {
    const config = loadConfig({});
    assert.ok(
      config.workerRemoteConcurrency * (60_000 / config.replicatePollMs) <= 3000,
      `${config.workerRemoteConcurrency} jobs every ${config.replicatePollMs} ms`,
    );
  });

  it('when Retry-After is seconds or a date, then it becomes a wait', () => {
    assert.equal(retryAfterMs('2'), 2000);
    assert.equal(retryAfterMs(new Date(Date.now() + 3000).toUTCString(), Date.now())! > 1000, true);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
  });

  it('when an output differs from the request in size or by more than a tenth in duration, then the difference is named', () => {
    assert.deepEqual(mismatch({ width: 1024, height: 576 }, { width: 1536, height: 1024, duration_seconds: null }), {
      requestedSize: '1024x576',
      measuredSize: '1536x1024',
    });
    assert.deepEqual(mismatch({ duration: 4 }, { width: 640, height: 360, duration_seconds: 2 }), { requestedSeconds: 4, measuredSeconds: 2 });
    assert.equal(mismatch({ duration: 4, width: 640, height: 360 }, { width: 640, height: 360, duration_seconds: 4.2 }), undefined);
  });

  it('when a replicate entry is mapped, then placeholders keep their types and a broken entry names the problem', () => {
    const entry = parseReplicateEntry(
      { model: 'a/b', input: { prompt: 'p: {prompt}', duration: '{duration}', audio: '{audio}', seed: '{seed}', fps: 24 } },
      'video',
      'm',
    );
    assert.deepEqual(inputFor(entry, { prompt: 'hi', duration: 4, audio: true, seed: null } as never), { prompt: 'p: hi', duration: 4, audio: true, fps: 24 });
    assert.throws(
      () => parseReplicateEntry({ model: 'a/b', input: { x: '{nope}' } }, 'video', 'catalog model v'),
      /catalog model v: replicate\.input\.x names \{nope\}/,
    );
    assert.throws(() => parseReplicateEntry({ input: {} }, 'video', 'm'), /exactly one of model and version/);
    assert.throws(() => parseReplicateEntry({ model: 'nope', input: {} }, 'video', 'm'), /owner\/name/);
    assert.throws(() => parseReplicateEntry(undefined, 'video', 'm'), /needs a "replicate" mapping/);
  });

  it('when a model names a provider that is not configured, then the server does not start, naming the model', async () => {
    const dir = tempDataDir();
    const env = { LOG_LEVEL: 'silent', DATA_DIR: dir, PORT: '0' };
    await assert.rejects(
      startServer(loadConfig({ ...env, IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1' })),
      /catalog model gemforge-image-1: provider openai-images needs IMAGE_UPSTREAM_URL/,
    );
    await assert.rejects(
      startServer(loadConfig({ ...env, IMAGE_UPSTREAM_URL: 'http://127.0.0.1:9', IMAGE_UPSTREAM_MODELS: 'nope=gpt-image-1' })),
      /IMAGE_UPSTREAM_MODELS names nope, which is not in the catalog/,
    );
    const catalog = path.join(dir, 'bad.yaml');
    const doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'server/catalog/models.yaml'), 'utf8')) as { models: Array<Record<string, unknown>> };
    doc.models.find((m) => m.id === 'gemforge-video-1')!.provider = 'replicate';
    fs.writeFileSync(catalog, YAML.stringify(doc));
    await assert.rejects(
      startServer(loadConfig({ ...env, CATALOG_PATH: catalog })),
      /catalog model gemforge-video-1: provider replicate needs a "replicate" mapping/,
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('remote providers: OpenAI-compatible images', () => {
  let fake: FakeOpenAiImages;
  let s: TestServer;
  before(async () => {
    fake = await startFakeOpenAiImages({ apiKey: UPSTREAM_KEY });
    s = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        IMAGE_UPSTREAM_URL: `${fake.url}/v1`,
        IMAGE_UPSTREAM_API_KEY: UPSTREAM_KEY,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1,gemforge-image-edit-1=dall-e-3',
        WORKER_POLL_MS: '20',
        REMOTE_ATTEMPT_TIMEOUT_SECONDS: '2',
        REMOTE_DEADLINE_SECONDS: '6',
        REMOTE_OUTPUT_MAX_BYTES: '3000000',
      },
    });
  });
  after(async () => {
    await s.close();
    await fake.close();
  });

  it('when an image model maps to the upstream, then the outputs are the upstream images, stored as ours, one call per output with its idempotency key', async () => {
    const u = await s.user({ gems: 100 });
    const r = await submit(s, u.secret, IMAGE, {
      model: 'gemforge-image-1',
      prompt: 'a lighthouse at dusk',
      parameters: { ratio: '16:9', resolution: '1024', outputCount: 2, outputFormat: 'webp', negativePrompt: 'people' },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assertSettled(task);
    const calls = fake.requests.filter((q) => q.path === '/v1/images/generations');
    assert.equal(calls.length, 2);
    for (const [i, call] of calls.entries()) {
      const body = call.json as Record<string, unknown>;
      assert.equal(body.model, 'gpt-image-1');
      assert.equal(body.size, '1536x1024', 'the nearest landscape size');
      assert.equal(body.n, 1);
      assert.equal(body.output_format, 'webp');
      assert.equal(body.quality, 'medium');
      assert.match(String(body.prompt), /a lighthouse at dusk[\s\S]*Avoid: people/);
      assert.equal(call.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
      assert.match(String(call.headers['idempotency-key']), new RegExp(`^gemforge-${task.id}-[01]$`));
      assert.notEqual(call.headers['idempotency-key'], calls[1 - i]!.headers['idempotency-key']);
    }
    for (const output of task.outputs) {
      assert.equal(output.asset!.mimeType, 'image/webp');
      assert.ok(!output.asset!.url.startsWith(fake.url), 'the client gets our URL, never the upstream');
      const got = await download(output.asset!.url);
      assert.equal(got.status, 200);
      const meta = await sharp(got.bytes).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height], ['webp', 1536, 1024]);
    }
    assert.ok(!JSON.stringify(task).includes(UPSTREAM_KEY));
  });

  it('when the upstream answers with URLs, then the bytes it serves are downloaded and stored unchanged', async () => {
    const urlFake = await startFakeOpenAiImages({ answer: 'url' });
    const t = await startTestServer({
      env: { ...LOOPBACK_FETCH, IMAGE_UPSTREAM_URL: urlFake.url, IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1', WORKER_POLL_MS: '20' },
    });
    try {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'a red fox', parameters: { resolution: '1024' } });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      const served = urlFake.requests.find((q) => q.method === 'GET' && q.path.startsWith('/files/'))!;
      const original = Buffer.from(await (await fetch(`${urlFake.url}${served.path}`)).arrayBuffer());
      const stored = await download(task.outputs[0]!.asset!.url);
      assert.equal(sha(stored.bytes), sha(original), 'exactly the bytes the upstream returned');
    } finally {
      await t.close();
      await urlFake.close();
    }
  });

  it('when the request has a source image, then it goes to the edits endpoint as multipart with the image', async () => {
    const u = await s.user({ gems: 100 });
    const source = await uploadAsset(s, u.secret, await imageFixture('png', 64, 48), 'image/png');
    const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'make it snow', parameters: { resolution: '1024', sourceImage: source } });
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const edit = fake.requests.filter((q) => q.path === '/v1/images/edits').at(-1)!;
    assert.equal(edit.form!.fields.prompt, 'make it snow');
    assert.equal(edit.form!.fields.model, 'gpt-image-1');
    assert.equal(edit.form!.files.length, 1);
    assert.equal((await sharp(edit.form!.files[0]!.bytes).metadata()).width, 64, 'the uploaded source image itself');
  });

  it('when the mapped upstream model cannot do what is asked, then 422 before anything is reserved', async () => {
    const u = await s.user({ gems: 100 });
    const source = await uploadAsset(s, u.secret, await imageFixture('png', 64, 48), 'image/png');
    const before = fake.requests.length;
    const r = await submit(s, u.secret, IMAGE, {
      model: 'gemforge-image-edit-1',
      prompt: 'make it snow',
      parameters: { resolution: '512', sourceImage: source },
    });
    assert.equal(r.status, 422);
    assert.equal(r.body.error.code, 'INVALID_REQUEST');
    assert.match(r.body.error.message, /cannot edit images.*dall-e-3/);
    assert.equal(await balanceOf(s, u.accountId), 100, 'nothing reserved');
    assert.equal(fake.requests.length, before, 'nothing sent upstream');
  });

  it('when a task carries scenario markers, then the scenario layer plays them with the remote provider as with the local one', async () => {
    const u = await s.user({ gems: 100 });
    const before = fake.requests.length;
    const failed = await waitForTask(
      s,
      u.secret,
      (await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'no luck [[scenario:fail]]', parameters: { resolution: '512' } })).body.task.id,
    );
    assert.equal(failed.status, 'failed');
    assert.equal(fake.requests.length, before, 'a failing test card never reaches the upstream');
    const partial = await waitForTask(
      s,
      u.secret,
      (await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'half [[scenario:partial]]', parameters: { resolution: '512', outputCount: 2 } }))
        .body.task.id,
    );
    assert.equal(partial.status, 'partial');
    assertSettled(partial);
    const sent = fake.requests.slice(before);
    assert.equal(sent.length, 1, 'only the first output is asked of the upstream');
    assert.equal((sent[0]!.json as { prompt: string }).prompt, 'half', 'the marker never reaches the upstream');
    const cancelled = await waitForTask(
      s,
      u.secret,
      (await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'stop [[scenario:cancel]]', parameters: { resolution: '512' } })).body.task.id,
    );
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.error!.code, 'CANCELLED');
  });

  it('when a submission carries a submission test card, then the scenario layer around the remote provider answers it as around the local one, and nothing reaches the upstream', async () => {
    const u = await s.user({ gems: 100 });
    const before = fake.requests.length;
    const image = (prompt: string, extra: Record<string, unknown> = {}) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' }, ...extra });

    const busyKey = newKey('unavailable');
    const busy = await submit(s, u.secret, IMAGE, image('busy [[scenario:provider-unavailable]]'), busyKey);
    assert.deepEqual([busy.status, busy.body.error.code], [503, 'PROVIDER_UNAVAILABLE']);
    assert.equal(await balanceOf(s, u.accountId), 100, 'nothing reserved');
    assert.equal((await submit(s, u.secret, IMAGE, image('busy [[scenario:provider-unavailable]]'), busyKey)).status, 503, 'the same identity may be retried');

    const source = await uploadAsset(s, u.secret, await imageFixture('png', 64, 48), 'image/png');
    const waiting = await submit(s, u.secret, IMAGE, image('wait [[scenario:references-processing]]', { referenceAssetIds: [source] }));
    assert.deepEqual([waiting.status, waiting.body.error.code], [409, 'REFERENCES_PROCESSING']);
    assert.match(waiting.body.error.message, new RegExp(source));
    assert.equal(await balanceOf(s, u.accountId), 100, 'nothing reserved');

    const lostKey = newKey('uncertain');
    for (let i = 0; i < 2; i++) {
      const lost = await submit(s, u.secret, IMAGE, image('lost [[scenario:uncertain]]'), lostKey);
      assert.deepEqual([lost.status, lost.body.error.code], [409, 'REQUEST_UNCERTAIN']);
    }
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.equal(summary.outstandingReservations.count, 1, 'the reservation stays held');
    assert.equal(summary.balance, 98);

    const single = await waitForTask(s, u.secret, (await submit(s, u.secret, IMAGE, image('one [[scenario:partial]]'))).body.task.id);
    assert.equal(single.status, 'partial');
    assert.equal(single.outputs.length, 2, 'a single-output task gets an alternate take that fails');
    assert.equal(single.chargedGems, 1);
    assertSettled(single);
    const sent = fake.requests.slice(before);
    assert.equal(sent.length, 1, 'only the first take of the partial card is asked of the upstream');
    assert.equal((sent[0]!.json as { prompt: string }).prompt, 'one');
  });

  it('when the upstream answers 429 with Retry-After, or 503, then the call is retried and the task succeeds once', async () => {
    const u = await s.user({ gems: 100 });
    fake.fail(
      'POST /v1/images/generations',
      { status: 429, headers: { 'retry-after': '1' }, body: '{"error":{"message":"rate limited"}}' },
      { status: 503, body: '{}' },
    );
    const started = Date.now();
    const generationsBefore = fake.generations();
    const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'retry me', parameters: { resolution: '512' } });
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assert.ok(Date.now() - started >= 1000, 'Retry-After was honoured');
    assert.equal(fake.generations() - generationsBefore, 1);
    assert.equal(task.chargedGems, task.quotedGems);
  });

  it('when the upstream refuses under its content policy, then the task fails with a sanitized message and the Gems are released', async () => {
    const u = await s.user({ gems: 100 });
    const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'a content-policy test', parameters: { resolution: '512' } });
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'failed');
    assert.match(task.error!.message, /refused the request under its content policy/);
    assert.ok(!/safety system/.test(JSON.stringify(task)), "the upstream's own words are not passed on");
    assertSettled(task);
    assert.equal(await balanceOf(s, u.accountId), 100);
  });

  for (const [name, route, fault, message] of [
    ['an image that is really HTML', 'POST /v1/images/generations', { html: true }, /not an image/],
    ['an oversize image', 'POST /v1/images/generations', { oversize: 4_000_000 }, /larger than 3000000 bytes/],
  ] as const) {
    it(`when the upstream answers ${name}, then the task fails, nothing is charged, and the API never answers 5xx`, async () => {
      const u = await s.user({ gems: 100 });
      fake.fail(route, fault);
      const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: `fault ${name}`, parameters: { resolution: '512' } });
      assert.equal(r.status, 202);
      const task = await waitForTask(s, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed');
      assert.match(task.error!.message, message);
      assertSettled(task);
      assert.equal(await balanceOf(s, u.accountId), 100);
    });
  }

  for (const [name, fault] of [
    ['malformed JSON', { malformed: true }],
    ['a list without an image', { status: 200, afterWork: true, body: '{"created":1700000000,"data":[]}' }],
    ['another shape', { status: 200, afterWork: true, body: '{"created":1700000000,"result":"done"}' }],
  ] as const) {
    it(`when the upstream answers a 2xx with ${name}, then the work may be done and paid upstream: the slot is held, not released, and not sent again`, async () => {
      const u = await s.user({ gems: 100 });
      const before = fake.requests.length;
      fake.fail('POST /v1/images/generations', fault);
      const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: `unreadable ${name}`, parameters: { resolution: '512' } });
      assert.equal(r.status, 202);
      const id = r.body.task.id as string;
      const job = await until(
        'the job held',
        async () => {
          const row = await s.db('jobs').where({ task_id: id }).first();
          return row?.state === 'held' && row;
        },
        10_000,
      );
      assert.match(job.last_error, /cannot be known/);
      assert.equal(fake.requests.length - before, 1, 'asked once');
      assert.equal((await taskUntil(s, u.secret, id, () => true)).status, 'processing');
      assert.ok((await balanceOf(s, u.accountId)) < 100, 'the reservation is held for the operator');
    });
  }

  it('when the upstream never answers, then past the deadline the task is held with its reservation (its outcome cannot be known), not paid twice', async () => {
    const u = await s.user({ gems: 100 });
    fake.fail('POST /v1/images/generations', { hang: true });
    const r = await submit(s, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'hang forever', parameters: { resolution: '512' } });
    const id = r.body.task.id as string;
    await taskUntil(s, u.secret, id, (t) => t.status === 'processing');
    const job = await until(
      'the job held',
      async () => {
        const row = await s.db('jobs').where({ task_id: id }).first();
        return row?.state === 'held' && row;
      },
      10_000,
    );
    assert.match(job.last_error, /cannot be known/);
    assert.ok(!String(job.last_error).includes(UPSTREAM_KEY));
    const task = await taskUntil(s, u.secret, id, () => true);
    assert.equal(task.status, 'processing');
    assert.ok((await balanceOf(s, u.accountId)) < 100, 'the reservation is held for the operator');
  });
});

describe('remote providers: their own worker lane', () => {
  it('when many remote jobs wait on a slow upstream, then they are in flight at once and a local job still runs meanwhile', async () => {
    const slow = await startFakeOpenAiImages({ delayMs: 20_000 });
    const t = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        IMAGE_UPSTREAM_URL: slow.url,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1',
        WORKER_CONCURRENCY: '1',
        WORKER_POLL_MS: '20',
      },
    });
    try {
      const u = await t.user({ gems: 1000 });
      const remote: string[] = [];
      for (let i = 0; i < 12; i++)
        remote.push((await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: `slow ${i}`, parameters: { resolution: '512' } })).body.task.id);
      await until('12 remote calls in flight', () => slow.requests.filter((q) => q.path === '/v1/images/generations').length >= 12, 15_000);
      // The one local loop is free: a local music job runs while every remote call still waits.
      const local = await submit(t, u.secret, AUDIO, {
        model: 'gemforge-music-1',
        operation: 'music',
        prompt: 'a short calm tune',
        parameters: { duration: '30' },
      });
      const done = await waitForTask(t, u.secret, local.body.task.id);
      assert.equal(done.status, 'succeeded');
      for (const id of remote) assert.equal((await taskUntil(t, u.secret, id, () => true)).status, 'processing');
    } finally {
      await t.close();
      await slow.close();
    }
  });
});

describe('remote providers: OpenAI-compatible speech', () => {
  let fake: FakeUpstream;
  let s: TestServer;
  before(async () => {
    fake = await startFakeOpenAiSpeech({ apiKey: UPSTREAM_KEY });
    s = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        SPEECH_UPSTREAM_URL: fake.url,
        SPEECH_UPSTREAM_API_KEY: UPSTREAM_KEY,
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${SAWYER}=onyx`,
        WORKER_POLL_MS: '20',
      },
    });
  });
  after(async () => {
    await s.close();
    await fake.close();
  });

  it('when a speech model maps to the upstream, then the voice, speed and format are carried over and the volume is applied here', async () => {
    const u = await s.user({ gems: 100 });
    const text = 'The quick brown fox jumps over the lazy dog, twice over.';
    const plain = await waitForTask(
      s,
      u.secret,
      (await submit(s, u.secret, AUDIO, { model: 'gemforge-speech-1', operation: 'speech', prompt: text, parameters: { voiceProfileId: SAWYER, speed: 1.5 } }))
        .body.task.id,
    );
    assert.equal(plain.status, 'succeeded', JSON.stringify(plain.error));
    const call = fake.requests.at(-1)!.json as Record<string, unknown>;
    assert.deepEqual(call, { model: 'gpt-4o-mini-tts', input: text, voice: 'onyx', speed: 1.5, response_format: 'wav' });
    const louder = await waitForTask(
      s,
      u.secret,
      (
        await submit(s, u.secret, AUDIO, {
          model: 'gemforge-speech-1',
          operation: 'speech',
          prompt: text,
          parameters: { voiceProfileId: SAWYER, speed: 1.5, volume: 6 },
        })
      ).body.task.id,
    );
    assert.equal(louder.status, 'succeeded', JSON.stringify(louder.error));
    const a = await download(plain.outputs[0]!.asset!.url);
    const b = await download(louder.outputs[0]!.asset!.url);
    assert.equal(a.type, 'audio/wav');
    const peak = (wav: Buffer) => {
      let max = 0;
      for (let i = 44; i + 1 < wav.length; i += 2) max = Math.max(max, Math.abs(wav.readInt16LE(i)));
      return max;
    };
    assert.ok(peak(b.bytes) > peak(a.bytes) * 1.5, `6 dB louder: ${peak(b.bytes)} vs ${peak(a.bytes)}`);
  });

  it('when the voice has no upstream voice, then 422 before anything is reserved', async () => {
    const u = await s.user({ gems: 100 });
    const r = await submit(s, u.secret, AUDIO, {
      model: 'gemforge-speech-1',
      operation: 'speech',
      prompt: 'hello',
      parameters: { voiceProfileId: 'voice_72f75e56f33b8e9d6d8f4475' },
    });
    assert.equal(r.status, 422);
    assert.match(r.body.error.message, /voice voice_72f75e56f33b8e9d6d8f4475 is not available for this model/);
    assert.equal(await balanceOf(s, u.accountId), 100);
  });
});

describe('remote providers: Replicate-shaped predictions', () => {
  let fake: FakeReplicate;
  let music: FakeReplicate;
  let s: TestServer;
  let dir: string;
  before(async () => {
    fake = await startFakeReplicate({ apiKey: UPSTREAM_KEY, processingMs: 300, outputs: 'video' });
    music = await startFakeReplicate({ apiKey: UPSTREAM_KEY, processingMs: 200, outputs: 'audio' });
    dir = tempDataDir();
    s = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        CATALOG_PATH: remoteCatalog(dir),
        REPLICATE_API_URL: fake.url,
        REPLICATE_API_TOKEN: UPSTREAM_KEY,
        REPLICATE_POLL_MS: '50',
        WORKER_POLL_MS: '20',
        REMOTE_DEADLINE_SECONDS: '3',
      },
    });
  });
  after(async () => {
    await s.close();
    await fake.close();
    await music.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when a video model is a prediction model, then one prediction is created with the mapped input and its video is stored as ours', async () => {
    const u = await s.user({ gems: 1000 });
    const r = await submit(s, u.secret, VIDEO, {
      model: 'gemforge-video-1',
      prompt: 'waves at night',
      parameters: { mode: 'text-to-video', duration: 2, ratio: '16:9', resolution: '480p' },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const created = fake.predictions().at(-1)!;
    assert.equal(created.model, 'acme/video-gen');
    assert.deepEqual(created.input, { prompt: 'waves at night', duration: 2, aspect_ratio: '16:9', fps: 24, note: 'made for text-to-video' });
    const create = fake.requests.find((q) => q.method === 'POST' && q.path === '/v1/models/acme/video-gen/predictions')!;
    assert.equal(create.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    const got = await download(task.outputs[0]!.asset!.url);
    assert.equal(got.type, 'video/mp4');
    const file = path.join(dir, 'out.mp4');
    fs.writeFileSync(file, got.bytes);
    const probe = await probeAv(FFPROBE, file);
    assert.equal(probe.video?.codec, 'h264');
    assert.deepEqual([probe.video?.width, probe.video?.height], [640, 360]);
    assert.ok(Math.abs((probe.durationSeconds ?? 0) - 2) < 0.2, `2 s: ${probe.durationSeconds}`);
    assert.ok(!JSON.stringify(task).includes(created.id), 'the upstream id never reaches the client');
  });

  it('when a prediction fails under the content policy, then the task fails sanitized and its Gems are released', async () => {
    const u = await s.user({ gems: 1000 });
    const r = await submit(s, u.secret, VIDEO, {
      model: 'gemforge-video-1',
      prompt: 'content-policy please',
      parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
    });
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'failed');
    assert.match(task.error!.message, /could not make this output under its content policy/);
    assert.ok(!/NSFW/.test(JSON.stringify(task)));
    assert.equal(await balanceOf(s, u.accountId), 1000);
  });

  it('when a prediction is still running at the deadline, then it is cancelled upstream and the task fails, nothing charged', async () => {
    const slow = await startFakeReplicate({ processingMs: Infinity });
    const t = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        CATALOG_PATH: remoteCatalog(dir),
        REPLICATE_API_URL: slow.url,
        REPLICATE_POLL_MS: '50',
        WORKER_POLL_MS: '20',
        REMOTE_DEADLINE_SECONDS: '1',
      },
    });
    try {
      const u = await t.user({ gems: 1000 });
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'never ends',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
      });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed');
      assert.match(task.error!.message, /did not finish within 1 s; the prediction was cancelled/);
      assert.equal(slow.predictions()[0]!.status, 'canceled');
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000);
    } finally {
      await t.close();
      await slow.close();
    }
  });

  it('when a music model is a version-pinned prediction model, then its audio is stored as ours', async () => {
    const t = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        CATALOG_PATH: remoteCatalog(dir),
        REPLICATE_API_URL: music.url,
        REPLICATE_API_TOKEN: UPSTREAM_KEY,
        REPLICATE_POLL_MS: '50',
        WORKER_POLL_MS: '20',
      },
    });
    try {
      const u = await t.user({ gems: 1000 });
      const r = await submit(t, u.secret, AUDIO, {
        model: 'gemforge-music-1',
        operation: 'music',
        prompt: 'a calm piano piece',
        parameters: { duration: '30' },
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal(music.predictions().at(-1)!.version, '80f189984e5ca70287d13342f6daa0db45cba3c131c4e46dc81360f3a4c4f690');
      assert.deepEqual(music.predictions().at(-1)!.input, { prompt: 'a calm piano piece', duration: 30 });
      const got = await download(task.outputs[0]!.asset!.url);
      assert.equal(got.type, 'audio/mpeg');
    } finally {
      await t.close();
    }
  });

  it('when the server is SIGKILLed while a prediction is processing, then after a restart it is looked up, not created again: one prediction, one charge', async () => {
    const slow = await startFakeReplicate({ apiKey: UPSTREAM_KEY, processingMs: Infinity });
    const dataDir = tempDataDir();
    const env = {
      ...LOOPBACK_FETCH,
      DATA_DIR: dataDir,
      CATALOG_PATH: remoteCatalog(dir),
      REPLICATE_API_URL: slow.url,
      REPLICATE_API_TOKEN: UPSTREAM_KEY,
      REPLICATE_POLL_MS: '50',
      WORKER_POLL_MS: '50',
      WORKER_LEASE_MS: '1000',
      WORKER_RETRY_BACKOFF_MS: '0',
    };
    const db0 = await openDb(await dbOptionsFor(dataDir));
    const a = await accounts.createAccount(db0, systemClock, { name: 'crash' });
    await ledger.credit(db0, systemClock, a.id, 1000, 'grant');
    const { secret } = await accounts.createKey(db0, systemClock, 'gf', { accountId: a.id, name: 'k', scopes: ['read', 'generate'] });
    await db0.destroy();
    let child = await startServerChild(env);
    const post = await fetch(`${child.url}${VIDEO}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': newKey('crash') },
      body: JSON.stringify({
        model: 'gemforge-video-1',
        prompt: 'crash mid prediction',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
      }),
    });
    assert.equal(post.status, 202);
    const id = ((await post.json()) as { task: { id: string } }).task.id;
    const polls = () => slow.requests.filter((q) => q.method === 'GET').length;
    await until('a prediction polled', () => slow.predictions().length > 0 && polls() >= 2, 15_000);
    await child.kill('SIGKILL');
    assert.equal(await expireLeases(dataDir), 1, 'the lease runs out while nothing runs');
    const pollsBefore = polls();
    child = await startServerChild(env);
    try {
      await until('the restarted worker resumes the job (it polls the prediction)', () => polls() > pollsBefore, 15_000);
      slow.finish(slow.predictions()[0]!.id, 'succeeded');
      const task = await until(
        'the task finished',
        async () => {
          const res = await fetch(`${child.url}/api/generate/tasks/${id}`, { headers: { authorization: `Bearer ${secret}` } });
          const t = ((await res.json()) as { task: TaskBody }).task;
          return ['succeeded', 'failed', 'partial', 'cancelled'].includes(t.status) && t;
        },
        20_000,
      );
      assert.equal(task.status, 'succeeded', JSON.stringify(task));
      assertSettled(task);
      assert.equal(slow.predictions().length, 1, 'exactly one prediction was created upstream');
    } finally {
      await child.kill('SIGTERM');
      await slow.close();
    }
    const db = await openDb(await dbOptionsFor(dataDir));
    try {
      assert.deepEqual((await verifyLedger(db, [verifyTasks])).problems, []);
      assert.equal((await db('ledger_entries').where({ account_id: a.id, type: 'post' })).length, 1, 'charged exactly once');
    } finally {
      await db.destroy();
    }
  });
});

describe('remote providers from the CLI', () => {
  it('when gemforge image, speech and video run against models with remote providers, then the files written are exactly the bytes the upstreams returned', async () => {
    const images = await startFakeOpenAiImages({ answer: 'url' });
    const speech = await startFakeOpenAiSpeech({});
    const predictions = await startFakeReplicate({ processingMs: 100 });
    const dir = tempDataDir();
    const t = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        IMAGE_UPSTREAM_URL: images.url,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1',
        SPEECH_UPSTREAM_URL: speech.url,
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=tts-1',
        SPEECH_UPSTREAM_VOICES: `${SAWYER}=alloy`,
        CATALOG_PATH: remoteCatalog(dir),
        REPLICATE_API_URL: predictions.url,
        REPLICATE_POLL_MS: '50',
        WORKER_POLL_MS: '20',
      },
    });
    try {
      const u = await t.user({ gems: 10_000 });
      const env = { PATH: process.env.PATH ?? '', GEMFORGE_API_KEY: u.secret, GEMFORGE_BASE_URL: t.url, GEMFORGE_POLL_SCHEDULE_MS: '100' };
      const cli = async (args: string[]) => {
        const r = await run(process.execPath, [path.join(ROOT, 'scripts/gemforge.mjs'), ...args, '--json'], { env });
        assert.equal(r.code, 0, r.stderr);
        const files = (JSON.parse(r.stdout) as { files: Array<{ path: string }> }).files;
        assert.equal(files.length, 1);
        return fs.readFileSync(files[0]!.path);
      };
      const served = async (fake: FakeUpstream, prefix: string) => {
        const q = fake.requests.filter((r) => r.method === 'GET' && r.path.startsWith(prefix)).at(-1)!;
        return Buffer.from(await (await fetch(`${fake.url}${q.path}`)).arrayBuffer());
      };

      const png = await cli(['image', 'a red fox', '--model', 'gemforge-image-1', '--param', 'resolution=1024', '--out', path.join(dir, 'img')]);
      assert.equal(sha(png), sha(await served(images, '/files/')));

      const wav = await cli(['speech', 'Hello from the upstream voice.', '--model', 'gemforge-speech-1', '--voice', SAWYER, '--out', path.join(dir, 'speech')]);
      const again = await fetch(`${speech.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(speech.requests.at(-1)!.json),
      });
      assert.equal(sha(wav), sha(Buffer.from(await again.arrayBuffer())), 'the upstream audio, unchanged');

      const mp4 = await cli([
        'video',
        'waves on a cliff',
        '--model',
        'gemforge-video-1',
        '--param',
        'duration=2',
        '--param',
        'resolution=480p',
        '--out',
        path.join(dir, 'video'),
      ]);
      assert.equal(sha(mp4), sha(await served(predictions, '/files/')));
    } finally {
      await t.close();
      await images.close();
      await speech.close();
      await predictions.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A PNG whose header declares `width`×`height` over a 16×16 image's data: refused from its header, never decoded. */
async function pngDeclaring(width: number, height: number): Promise<Buffer> {
  const png = await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 9, g: 9, b: 9 } } })
    .png()
    .toBuffer();
  png.writeUInt32BE(width, 16);
  png.writeUInt32BE(height, 20);
  png.writeUInt32BE(zlib.crc32(png.subarray(12, 29)), 29); // IHDR's CRC over its type and data
  return png;
}

describe('remote providers: bounded answers and fetched addresses', () => {
  let images: FakeOpenAiImages;
  let speech: FakeUpstream;
  let predictions: FakeReplicate;
  let s: TestServer;
  let dir: string;
  before(async () => {
    images = await startFakeOpenAiImages({ apiKey: UPSTREAM_KEY });
    speech = await startFakeOpenAiSpeech({ apiKey: UPSTREAM_KEY });
    predictions = await startFakeReplicate({ apiKey: UPSTREAM_KEY, processingMs: Infinity });
    dir = tempDataDir();
    s = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        IMAGE_UPSTREAM_URL: `${images.url}/v1`,
        IMAGE_UPSTREAM_API_KEY: UPSTREAM_KEY,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1',
        SPEECH_UPSTREAM_URL: speech.url,
        SPEECH_UPSTREAM_API_KEY: UPSTREAM_KEY,
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${SAWYER}=onyx`,
        CATALOG_PATH: remoteCatalog(dir),
        REPLICATE_API_URL: predictions.url,
        REPLICATE_API_TOKEN: UPSTREAM_KEY,
        REPLICATE_POLL_MS: '50',
        WORKER_POLL_MS: '20',
        REMOTE_ATTEMPT_TIMEOUT_SECONDS: '30',
        REMOTE_DEADLINE_SECONDS: '30',
        REMOTE_OUTPUT_MAX_BYTES: '3000000',
      },
    });
  });
  after(async () => {
    await s.close();
    await images.close();
    await speech.close();
    await predictions.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Submits, waits, and checks the slot failed with nothing charged; returns the task's error message. */
  async function failsUncharged(path: string, body: Record<string, unknown>): Promise<string> {
    const u = await s.user({ gems: 100 });
    const r = await submit(s, u.secret, path, body);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const task = await waitForTask(s, u.secret, r.body.task.id);
    assert.equal(task.status, 'failed', JSON.stringify(task));
    assertSettled(task);
    assert.equal(await balanceOf(s, u.accountId), 100, 'the Gems are released');
    return task.error!.message;
  }

  it('when an image answer carries an endless b64_json, then the read is cut at the output limit (4/3 of it in base64) and the slot fails uncharged', async () => {
    images.fail('POST /v1/images/generations', {
      stream: { status: 200, contentType: 'application/json', prefix: '{"created":1,"data":[{"b64_json":"', fill: 'QUFB' },
    });
    const message = await failsUncharged(IMAGE, { model: 'gemforge-image-1', prompt: 'an endless answer', parameters: { resolution: '512' } });
    assert.match(message, /larger than 3000000 bytes/);
  });

  it('when an error body never ends, then its head is read within the attempt and the call is retried, not stuck: the slot fails uncharged', async () => {
    // 503: "not done", so it is sent again (a 500 to a creating call is an unknown outcome, held instead).
    const endless = {
      stream: { status: 503, contentType: 'application/json', prefix: '{"error":{"message":"', fill: 'x', intervalMs: 50, chunkBytes: 1024 },
    } as const;
    const own = await startFakeOpenAiImages({ apiKey: UPSTREAM_KEY });
    own.fail('POST /v1/images/generations', ...Array.from({ length: 6 }, () => endless));
    const t = await startTestServer({
      env: {
        ...LOOPBACK_FETCH,
        IMAGE_UPSTREAM_URL: own.url,
        IMAGE_UPSTREAM_API_KEY: UPSTREAM_KEY,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1',
        WORKER_POLL_MS: '20',
        REMOTE_ATTEMPT_TIMEOUT_SECONDS: '1',
        REMOTE_DEADLINE_SECONDS: '4',
      },
    });
    try {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'an endless error', parameters: { resolution: '512' } });
      const task = await waitForTask(t, u.secret, r.body.task.id, 30_000);
      assert.equal(task.status, 'failed', JSON.stringify(task));
      assert.match(task.error!.message, /unavailable \(HTTP 503\)/);
      assertSettled(task);
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 100);
    } finally {
      await t.close();
      await own.close();
    }
  });

  it('when a remote image declares 12000×12000 pixels and needs converting, then it is refused from its header by the upload limits and the slot fails uncharged', async () => {
    images.fail('POST /v1/images/generations', { bytes: await pngDeclaring(12_000, 12_000) });
    const message = await failsUncharged(IMAGE, {
      model: 'gemforge-image-1',
      prompt: 'an image bomb',
      parameters: { resolution: '512', outputFormat: 'webp' },
    });
    assert.match(message, /over this server's media limits \(The image is 12000×12000 pixels.*limit is 40,000,000 pixels/);
  });

  it('when a speech body never ends, then it is cut at the output limit while streamed to disk and the slot fails uncharged', async () => {
    speech.fail('POST /v1/audio/speech', { stream: { status: 200, contentType: 'audio/wav', prefix: 'RIFF', fill: '\0' } });
    const message = await failsUncharged(AUDIO, {
      model: 'gemforge-speech-1',
      operation: 'speech',
      prompt: 'an endless voice',
      parameters: { voiceProfileId: SAWYER },
    });
    assert.match(message, /larger than 3000000 bytes/);
  });

  it('when a prediction read answers an endless body, then the read is cut, the slot fails uncharged and the prediction is cancelled upstream', async () => {
    const before = predictions.predictions().length;
    predictions.fail('GET /v1/predictions/{id}', {
      stream: { status: 200, contentType: 'application/json', prefix: '{"id":"x","status":"processing","logs":"', fill: 'log ' },
    });
    const message = await failsUncharged(VIDEO, {
      model: 'gemforge-video-1',
      prompt: 'an endless poll',
      parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
    });
    assert.match(message, /malformed answer/);
    const made = predictions.predictions().slice(before);
    assert.equal(made.length, 1);
    assert.equal(made[0]!.status, 'canceled', 'billing upstream stops');
    assert.ok(predictions.requests.some((q) => q.method === 'POST' && q.path === `/v1/predictions/${made[0]!.id}/cancel`));
  });

  it('when an output URL points at 127.0.0.1 and REMOTE_FETCH_ALLOW does not list it, then it is never fetched and the slot fails uncharged', async () => {
    const urlFake = await startFakeOpenAiImages({ answer: 'url' });
    const t = await startTestServer({ env: { IMAGE_UPSTREAM_URL: urlFake.url, IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1', WORKER_POLL_MS: '20' } });
    try {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'an internal image', parameters: { resolution: '512' } });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed', JSON.stringify(task));
      assert.match(task.error!.message, /output address this server does not fetch: 127\.0\.0\.1 is a loopback address/);
      assertSettled(task);
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 100);
      assert.equal(urlFake.requests.filter((q) => q.path.startsWith('/files/')).length, 0, 'the internal address was never asked');
    } finally {
      await t.close();
      await urlFake.close();
    }
  });

  it('when an allowed output host redirects to an address that is not allowed, then the redirect is not followed and the slot fails uncharged', async () => {
    const urlFake = await startFakeOpenAiImages({ answer: 'url', outputHost: 'localhost' });
    const t = await startTestServer({
      env: { REMOTE_FETCH_ALLOW: 'localhost', IMAGE_UPSTREAM_URL: urlFake.url, IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1', WORKER_POLL_MS: '20' },
    });
    try {
      urlFake.fail('GET /files/{name}', { status: 302, headers: { location: `${urlFake.url}/files/internal.png` }, body: '' });
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'a redirected image', parameters: { resolution: '512' } });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed', JSON.stringify(task));
      assert.match(task.error!.message, /does not fetch: 127\.0\.0\.1 is a loopback address/);
      assertSettled(task);
      assert.deepEqual(
        urlFake.requests.filter((q) => q.path.startsWith('/files/')).map((q) => q.path.startsWith('/files/internal')),
        [false],
        'only the allowed host was asked',
      );
    } finally {
      await t.close();
      await urlFake.close();
    }
  });

  it(
    'when the server gets SIGTERM while a read is stuck on a trickling upstream body, then the read ends and the server stops within the grace period, the job handed back',
    { timeout: 90_000 },
    async () => {
      const dataDir = tempDataDir();
      const { secret } = await seedUserOnDisk(dataDir, 100);
      const child = await startServerChild({
        ...LOOPBACK_FETCH,
        DATA_DIR: dataDir,
        IMAGE_UPSTREAM_URL: images.url,
        IMAGE_UPSTREAM_API_KEY: UPSTREAM_KEY,
        IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1',
        IMAGE_UPSTREAM_IDEMPOTENT: 'true',
        WORKER_POLL_MS: '20',
        REMOTE_ATTEMPT_TIMEOUT_SECONDS: '3600',
        REMOTE_DEADLINE_SECONDS: '3600',
        SHUTDOWN_GRACE_SECONDS: '2',
      });
      try {
        const calls = () => images.requests.filter((q) => q.path === '/v1/images/generations').length;
        const before = calls();
        images.fail('POST /v1/images/generations', {
          stream: { status: 500, contentType: 'application/json', prefix: '{"error":{"message":"', fill: 'x', chunkBytes: 1, intervalMs: 500 },
        });
        const post = await fetch(`${child.url}${IMAGE}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': newKey('stuck') },
          body: JSON.stringify({ model: 'gemforge-image-1', prompt: 'a stuck read', parameters: { resolution: '512' } }),
        });
        assert.equal(post.status, 202);
        await until('the upstream is called', () => calls() > before, 15_000);
        const how = await child.kill('SIGTERM');
        assert.equal(how, 0, 'a clean exit');
        assert.ok(
          child.logs.some((l) => l.msg === 'job handed back to the queue at stop'),
          'the job is handed back for the next start',
        );
      } finally {
        await child.kill('SIGKILL');
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );
});

describe('remote providers: exactly once when a gateway answers 5xx after the work was done', () => {
  it('when the image upstream makes the image and a gateway answers 502, then it is not asked again: one generation, the task held, nothing charged', async () => {
    await withImageUpstream('gemforge-image-1=gpt-image-1', {}, async (fake, t) => {
      const u = await t.user({ gems: 100 });
      fake.fail('POST /v1/images/generations', { status: 502, afterWork: true });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'done then lost', parameters: { resolution: '512' } });
      const job = await heldJob(t, r.body.task.id);
      assert.match(job.last_error, /HTTP 502.*cannot be known/);
      assert.equal(fake.generations(), 1, 'one upstream generation for the slot');
      assert.equal(fake.requests.filter((q) => q.path === '/v1/images/generations').length, 1, 'never sent again');
      const task = await taskUntil(t, u.secret, r.body.task.id, () => true);
      assert.equal(task.status, 'processing');
      assert.equal(task.chargedGems, 0);
      assert.equal(await charges(t, u.accountId), 0, 'no Gem charged for an undelivered output');
    });
  });

  it('when the image upstream honours the idempotency key and a gateway answers 502 after the work, then the same key is sent again: one generation, one charge', async () => {
    await withImageUpstream('gemforge-image-1=gpt-image-1', { IMAGE_UPSTREAM_IDEMPOTENT: 'true' }, async (fake, t) => {
      const u = await t.user({ gems: 100 });
      fake.fail('POST /v1/images/generations', { status: 502, afterWork: true });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'done then lost, keyed', parameters: { resolution: '512' } });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal(fake.generations(), 1);
      const keys = fake.requests.filter((q) => q.path === '/v1/images/generations').map((q) => q.headers['idempotency-key']);
      assert.deepEqual(keys, [keys[0], keys[0]], 'sent again with the same key');
      assert.equal(await charges(t, u.accountId), 1);
    });
  });

  it('when the speech upstream makes the audio and a gateway answers 502, then it is not asked again: the task held, nothing charged', async () => {
    const fake = await startFakeOpenAiSpeech({});
    const t = await startTestServer({
      env: {
        SPEECH_UPSTREAM_URL: fake.url,
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${SAWYER}=onyx`,
        WORKER_POLL_MS: '20',
      },
    });
    try {
      const u = await t.user({ gems: 100 });
      fake.fail('POST /v1/audio/speech', { status: 502, afterWork: true });
      const r = await submit(t, u.secret, AUDIO, {
        model: 'gemforge-speech-1',
        operation: 'speech',
        prompt: 'Said once, answered 502.',
        parameters: { voiceProfileId: SAWYER },
      });
      await heldJob(t, r.body.task.id);
      assert.equal(fake.requests.filter((q) => q.path === '/v1/audio/speech').length, 1, 'one upstream synthesis for the slot');
      assert.equal(await charges(t, u.accountId), 0, 'no Gem charged for an undelivered output');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('when the prediction upstream creates the prediction and a gateway answers 502, then no second prediction is created: the task held, nothing charged', async () => {
    await withReplicate({ processingMs: 200 }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      fake.fail('POST /v1/models/{owner}/{name}/predictions', { status: 502, afterWork: true });
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'created then lost',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
      });
      await heldJob(t, r.body.task.id);
      assert.equal(fake.predictions().length, 1, 'one prediction upstream for the slot');
      assert.equal(await charges(t, u.accountId), 0, 'no Gem charged for an undelivered output');
    });
  });

  it('when the prediction upstream answers 502 carrying the created prediction, then it is looked up by its id, not created again', async () => {
    await withReplicate({ processingMs: 200 }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      fake.fail('POST /v1/models/{owner}/{name}/predictions', { status: 502, afterWork: true, echo: true });
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'created, answered 502 with its id',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
      });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal(fake.predictions().length, 1);
      assert.equal(fake.requests.filter((q) => q.method === 'POST' && q.path.endsWith('/predictions')).length, 1, 'never sent again');
      assert.equal(await charges(t, u.accountId), 1);
    });
  });

  it('when the prediction upstream answers 503 to a create, then nothing was done and the create is sent again: one prediction', async () => {
    await withReplicate({ processingMs: 200 }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      fake.fail('POST /v1/models/{owner}/{name}/predictions', { status: 503 });
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'resent once',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' },
      });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal(fake.predictions().length, 1, 'a 503 created nothing; the resend created one');
      assert.equal(fake.requests.filter((q) => q.method === 'POST' && q.path.endsWith('/predictions')).length, 2);
    });
  });
});

describe('remote providers: prediction reads', () => {
  const video = (prompt: string) => ({ model: 'gemforge-video-1', prompt, parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' } });

  it('when a prediction ends aborted, then the output fails within a few polls, nothing charged', async () => {
    await withReplicate({ processingMs: Infinity }, { REMOTE_DEADLINE_SECONDS: '60' }, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      const r = await submit(t, u.secret, VIDEO, video('aborted upstream'));
      await until('a prediction', () => fake.predictions().length === 1, 15_000);
      const polls = () => fake.requests.filter((q) => q.method === 'GET' && q.path.startsWith('/v1/predictions/')).length;
      fake.finish(fake.predictions()[0]!.id, 'aborted');
      const atAbort = polls();
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed');
      assert.match(task.error!.message, /aborted this output/);
      assert.ok(polls() - atAbort <= 3, `polls after the abort: ${polls() - atAbort}`);
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000);
    });
  });

  it('when reads of a prediction are throttled (429 without Retry-After), then they back off and the prediction is kept: one prediction, the output delivered', async () => {
    await withReplicate({ processingMs: 200 }, { REMOTE_DEADLINE_SECONDS: '60' }, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      fake.fail('GET /v1/predictions/{id}', ...Array.from({ length: 8 }, () => ({ status: 429 })));
      const r = await submit(t, u.secret, VIDEO, video('throttled reads'));
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal(fake.predictions().length, 1);
      assert.equal(await charges(t, u.accountId), 1);
    });
  });

  it('when several predictions on one deployment are polled at once, then the reads share one process-wide pace within REPLICATE_READS_PER_MINUTE and every output is delivered', async () => {
    // 120 a minute: 2 a second, a burst of 2; each job alone would poll every 10 ms.
    await withReplicate(
      { processingMs: 1500 },
      { REPLICATE_POLL_MS: '10', REPLICATE_READS_PER_MINUTE: '120', REMOTE_DEADLINE_SECONDS: '60' },
      async (fake, t) => {
        const u = await t.user({ gems: 1000 });
        const started = Date.now();
        const submitted = await Promise.all([
          submit(t, u.secret, VIDEO, video('paced read one')),
          submit(t, u.secret, VIDEO, video('paced read two')),
          submit(t, u.secret, VIDEO, video('paced read three')),
        ]);
        const tasks = await Promise.all(submitted.map((r) => waitForTask(t, u.secret, r.body.task.id)));
        const elapsedMs = Date.now() - started;
        for (const task of tasks) assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
        assert.equal(fake.predictions().length, 3);
        const reads = fake.requests.filter((q) => q.path.startsWith('/v1/predictions/')).length;
        // An upper bound from the time the run really took: the bucket's burst plus its refill.
        const allowed = 2 + Math.ceil((elapsedMs / 60_000) * 120) + 1;
        assert.ok(reads <= allowed, `${reads} reads in ${elapsedMs} ms; the pace allows ${allowed}`);
      },
    );
  });

  it('when a slot is given up after its prediction was created (a refused read), then the prediction is cancelled upstream, nothing charged', async () => {
    await withReplicate({ processingMs: Infinity }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      fake.fail('GET /v1/predictions/{id}', { status: 400 });
      const r = await submit(t, u.secret, VIDEO, video('read refused'));
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'failed');
      assert.equal(fake.predictions()[0]!.status, 'canceled', 'not left running unpaid');
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000);
    });
  });

  for (const shape of ['object', 'data', 'list'] as const) {
    it(`when a prediction's output is ${shape === 'object' ? 'an object of named outputs' : shape === 'data' ? 'a data: URL' : 'a list'}, then the output is taken`, async () => {
      await withReplicate({ processingMs: 100, outputShape: shape }, {}, async (fake, t) => {
        const u = await t.user({ gems: 1000 });
        const r = await submit(t, u.secret, VIDEO, video(`output as ${shape}`));
        const task = await waitForTask(t, u.secret, r.body.task.id);
        assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
        assert.equal((await download(task.outputs[0]!.asset!.url)).type, 'video/mp4');
        assert.equal(fake.predictions().length, 1);
      });
    });
  }

  it('when an output is named in an object, then the one named after the kind is taken', () => {
    assert.equal(outputUrl({ image: 'https://x/a.png', video: 'https://x/v.mp4' }, 'video'), 'https://x/v.mp4');
    assert.equal(outputUrl({ seed: 3, output: ['https://x/o.mp3'] }, 'audio'), 'https://x/o.mp3');
    assert.equal(outputUrl({ seed: 3 }, 'audio'), undefined);
  });

  it('when PUBLIC_BASE_URL is set and the mapping carries {sourceImage}, then image-to-video goes upstream with a signed link to the asset, which serves its bytes', async () => {
    const base = 'https://gemforge.example';
    await withVideoMapping(
      { model: 'acme/video-gen', input: { prompt: '{prompt}', image: '{sourceImage}', duration: '{duration}' } },
      { PUBLIC_BASE_URL: base },
      async (fake, t) => {
        const u = await t.user({ gems: 1000 });
        const png = await imageFixture('png', 64, 48);
        const source = await uploadAsset(t, u.secret, png, 'image/png');
        const caps = (await (await t.call('GET', '/api/generate/models', { key: u.secret })).json()) as {
          models: Array<{ id: string; capabilities: Record<string, unknown> }>;
        };
        assert.ok(
          (caps.models.find((m) => m.id === 'gemforge-video-1')!.capabilities.modes as string[]).includes('image-to-video'),
          'listed: the source image is carried',
        );
        const r = await submit(t, u.secret, VIDEO, {
          model: 'gemforge-video-1',
          prompt: 'animate this',
          parameters: { mode: 'image-to-video', duration: 2, resolution: '480p', sourceImage: source },
        });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        const task = await waitForTask(t, u.secret, r.body.task.id);
        assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
        const input = fake.predictions()[0]!.input as Record<string, unknown>;
        assert.match(String(input.image), new RegExp(`^${base}/files/${source}\\?expires=\\d+&sig=[0-9a-f]{64}$`));
        const served = await fetch(String(input.image).replace(base, t.url));
        assert.equal(served.status, 200);
        const meta = await sharp(Buffer.from(await served.arrayBuffer())).metadata();
        assert.deepEqual([served.headers.get('content-type'), meta.width, meta.height], ['image/png', 64, 48], 'the link serves the asset');
        const withEnd = await submit(t, u.secret, VIDEO, {
          model: 'gemforge-video-1',
          prompt: 'from here to there',
          parameters: { mode: 'image-to-video', duration: 2, resolution: '480p', sourceImage: source, endFrame: source },
        });
        assert.equal(withEnd.status, 422, 'a field the mapping does not carry is refused, never dropped');
        assert.match(withEnd.body.error.message, /not given endFrame/);
      },
    );
  });

  it('when PUBLIC_BASE_URL is unset, then even a mapping that carries {sourceImage} refuses image-to-video with 422 before anything is reserved', async () => {
    await withVideoMapping({ model: 'acme/video-gen', input: { prompt: '{prompt}', image: '{sourceImage}' } }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      const source = await uploadAsset(t, u.secret, await imageFixture('png', 64, 48), 'image/png');
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'animate this',
        parameters: { mode: 'image-to-video', duration: 2, resolution: '480p', sourceImage: source },
      });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.match(r.body.error.message, /without PUBLIC_BASE_URL/);
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000, 'nothing reserved');
      assert.equal(fake.predictions().length, 0);
    });
  });

  it('when a video request has a source image or references and the model is a prediction model, then 422 before anything is reserved', async () => {
    await withReplicate({ processingMs: 100 }, {}, async (fake, t) => {
      const u = await t.user({ gems: 1000 });
      const source = await uploadAsset(t, u.secret, await imageFixture('png', 64, 48), 'image/png');
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'animate this',
        parameters: { mode: 'image-to-video', duration: 2, resolution: '480p', sourceImage: source },
      });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'INVALID_REQUEST');
      assert.match(r.body.error.message, /sourceImage/);
      assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000, 'nothing reserved');
      assert.equal(fake.predictions().length, 0, 'nothing sent upstream');
    });
  });
});

describe("remote providers: the upstreams' dialects", () => {
  it('when a dall-e-2 model edits an image, then the source is sent as `image`, the one field dall-e-2 takes', async () => {
    await withImageUpstream('gemforge-image-1=dall-e-2', {}, async (fake, t) => {
      const u = await t.user({ gems: 100 });
      const source = await uploadAsset(t, u.secret, await imageFixture('png', 64, 64), 'image/png');
      const r = await submit(t, u.secret, IMAGE, {
        model: 'gemforge-image-1',
        prompt: 'make it snow',
        parameters: { ratio: '1:1', resolution: '512', sourceImage: source },
      });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      const edit = fake.requests.find((q) => q.path === '/v1/images/edits')!;
      assert.deepEqual(
        edit.form!.files.map((f) => f.name),
        ['image'],
      );
      const two = await submit(t, u.secret, IMAGE, {
        model: 'gemforge-image-1',
        prompt: 'merge',
        referenceAssetIds: [source],
        parameters: { ratio: '1:1', resolution: '512', sourceImage: source },
      });
      assert.equal(two.status, 422, 'dall-e-2 edits one image');
    });
  });

  it("when the style and negative prompt written into the prompt pass the upstream model's limit, then 422 at submission, not an upstream 400 after a 202", async () => {
    await withImageUpstream('gemforge-image-1=dall-e-3', {}, async (fake, t) => {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, {
        model: 'gemforge-image-1',
        prompt: 'x'.repeat(3990),
        parameters: { resolution: '1024', negativePrompt: 'people and cars', style: 'watercolor' },
      });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.match(r.body.error.message, /prompt with its style and negative prompt/);
      assert.equal(await balanceOf(t, u.accountId), 100, 'nothing reserved');
      assert.equal(fake.requests.length, 0);
    });
  });

  it('when the upstream model is chatgpt-image-latest, then it gets the GPT image sizes, not the exact size asked', async () => {
    await withImageUpstream('gemforge-image-1=chatgpt-image-latest', {}, async (fake, t) => {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'a wide bay', parameters: { ratio: '16:9', resolution: '1024' } });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      const body = fake.requests.find((q) => q.path === '/v1/images/generations')!.json as Record<string, unknown>;
      assert.equal(body.size, '1536x1024');
      assert.equal(body.quality, 'medium');
    });
  });

  it('when speech is asked as AAC with a volume, then the gain keeps it AAC', async () => {
    const fake = await startFakeOpenAiSpeech({});
    const dir = tempDataDir();
    const catalog = catalogWith(dir, { 'gemforge-speech-1': (m) => ((m.capabilities as Record<string, unknown>).outputFormat = 'audio/aac') });
    const t = await startTestServer({
      env: {
        CATALOG_PATH: catalog,
        SPEECH_UPSTREAM_URL: fake.url,
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${SAWYER}=onyx`,
        WORKER_POLL_MS: '20',
      },
    });
    try {
      const u = await t.user({ gems: 100 });
      const r = await submit(t, u.secret, AUDIO, {
        model: 'gemforge-speech-1',
        operation: 'speech',
        prompt: 'Louder, in AAC please.',
        parameters: { voiceProfileId: SAWYER, volume: 6 },
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal((fake.requests.at(-1)!.json as Record<string, unknown>).response_format, 'aac');
      assert.equal((await download(task.outputs[0]!.asset!.url)).type, 'audio/aac');
    } finally {
      await t.close();
      await fake.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('remote providers: discovery shows what the upstream can do', () => {
  /** The discovery entry of `id`. */
  async function listed(t: TestServer, key: string, id: string): Promise<Record<string, unknown>> {
    const { models } = (await (await t.call('GET', '/api/generate/models', { key })).json()) as {
      models: Array<{ id: string; capabilities: Record<string, unknown> }>;
    };
    return models.find((m) => m.id === id)!.capabilities;
  }

  it("when a prediction model's mapping lists the ratios and durations its upstream takes, then discovery lists only those and no source media, and another ratio is refused at submission before anything is reserved", async () => {
    await withVideoMapping(
      {
        model: 'acme/video-gen',
        input: { prompt: '{prompt}', aspect_ratio: '{ratio}', duration: '{duration}' },
        accepts: { ratio: ['16:9', '9:16', '21:9'], duration: [2, 4, 5] },
      },
      {},
      async (fake, t) => {
        const u = await t.user({ gems: 1000 });
        const caps = await listed(t, u.secret, 'gemforge-video-1');
        assert.deepEqual(caps.aspectRatios, ['16:9', '9:16'], 'what both the catalog and the upstream take');
        assert.deepEqual(caps.durations, [2, 4]);
        assert.deepEqual(caps.modes, ['text-to-video'], 'a mapped model is given no source image');
        assert.deepEqual([caps.maxReferenceImages, caps.maxReferenceVideos, caps.endFrame], [0, 0, false]);
        const square = await submit(t, u.secret, VIDEO, {
          model: 'gemforge-video-1',
          prompt: 'a square video',
          parameters: { mode: 'text-to-video', duration: 2, resolution: '480p', ratio: '1:1' },
        });
        assert.equal(square.status, 422, JSON.stringify(square.body));
        assert.match(square.body.error.message, /parameters\.ratio "1:1" is not available for this model \(its upstream takes 16:9, 9:16, 21:9\)/);
        assert.equal(await ledger.balanceOf(t.db, u.accountId), 1000, 'nothing reserved');
        assert.equal(fake.predictions().length, 0, 'nothing sent upstream');
        const wide = await submit(t, u.secret, VIDEO, {
          model: 'gemforge-video-1',
          prompt: 'a wide video',
          parameters: { mode: 'text-to-video', duration: 2, resolution: '480p', ratio: '9:16' },
        });
        assert.equal(wide.status, 202, JSON.stringify(wide.body));
        assert.equal((await waitForTask(t, u.secret, wide.body.task.id)).status, 'succeeded');
        assert.deepEqual(fake.predictions()[0]!.input, { prompt: 'a wide video', aspect_ratio: '9:16', duration: 2 });
      },
    );
  });

  it("when a mapping's table of what its upstream takes does not fit the catalog, then the start is refused naming the mismatch", () => {
    const listedVideo = { aspectRatios: ['16:9', '9:16', '1:1'], defaultRatio: '16:9', durations: [2, 4, 6, 8], defaultDuration: 4 };
    const entry = (accepts: unknown, input: Record<string, unknown> = { prompt: '{prompt}', aspect_ratio: '{ratio}', duration: '{duration}' }) => ({
      model: 'acme/video-gen',
      input,
      accepts,
    });
    assert.throws(
      () => parseReplicateEntry(entry({ ratio: ['4:5'] }), 'video', 'm', listedVideo),
      /m: replicate\.accepts\.ratio \(4:5\) shares no value with the catalog's aspectRatios \(16:9, 9:16, 1:1\)/,
    );
    assert.throws(() => parseReplicateEntry(entry({ ratio: ['9:16'] }), 'video', 'm', listedVideo), /does not take the catalog's defaultRatio 16:9/);
    assert.throws(
      () => parseReplicateEntry(entry({ resolution: ['720p'] }), 'video', 'm', listedVideo),
      /replicate\.accepts\.resolution names a field the mapping's input does not carry/,
    );
    assert.throws(() => parseReplicateEntry(entry({ seed: [1] }), 'video', 'm', listedVideo), /not a field whose values discovery lists/);
    assert.throws(() => parseReplicateEntry(entry({ ratio: [] }), 'video', 'm', listedVideo), /non-empty list/);
    assert.throws(() => parseReplicateEntry(entry(undefined, { prompt: '{prompt}' }), 'image', 'm', { sourceImage: 'required' }), /sourceImage as required/);
    assert.deepEqual(parseReplicateEntry(entry({ duration: [4, 8] }), 'video', 'm', listedVideo).accepts, { duration: ['4', '8'] });
  });

  it('when a fal image model lists the formats its upstream writes, then discovery shows only those and no source image', async () => {
    const fake = await startFakeFal({ processingMs: 100 });
    const dir = tempDataDir();
    const catalog = catalogWith(dir, {
      'gemforge-image-1': (m) => {
        m.provider = 'fal';
        m.fal = { model: 'fal-ai/flux/dev', input: { prompt: '{prompt}', output_format: '{outputFormat}' }, accepts: { outputFormat: ['png', 'jpeg'] } };
      },
    });
    const t = await startTestServer({ env: { ...LOOPBACK_FETCH, CATALOG_PATH: catalog, FAL_QUEUE_URL: fake.url, FAL_POLL_MS: '50', WORKER_POLL_MS: '20' } });
    try {
      const u = await t.user({ gems: 1000 });
      const caps = await listed(t, u.secret, 'gemforge-image-1');
      assert.deepEqual(caps.outputFormats, ['png', 'jpeg']);
      assert.deepEqual([caps.sourceImage, caps.referenceImages], ['none', { max: 0 }]);
      const webp = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'a webp', parameters: { resolution: '512', outputFormat: 'webp' } });
      assert.equal(webp.status, 422, JSON.stringify(webp.body));
      assert.match(webp.body.error.message, /parameters\.outputFormat "webp" is not available/);
      assert.equal(fake.submitted().length, 0);
    } finally {
      await t.close();
      await fake.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when an image model is mapped to gpt-image-1, then discovery names the size each ratio is really made at (16:9 as 1536x1024)', async () => {
    await withImageUpstream('gemforge-image-1=gpt-image-1', {}, async (_fake, t) => {
      const u = await t.user({ gems: 10 });
      const caps = await listed(t, u.secret, 'gemforge-image-1');
      const sizes = caps.upstreamSizes as Record<string, string>;
      assert.equal(sizes['16:9'], '1536x1024');
      assert.equal(sizes['1:1'], '1024x1024');
      assert.equal(sizes['2:3'], '1024x1536');
      assert.deepEqual(Object.keys(sizes), caps.ratios, 'every listed ratio is named');
      const local = await listed(t, u.secret, 'gemforge-image-edit-1');
      assert.equal(local.upstreamSizes, undefined, 'a local model is listed as the catalog says');
    });
  });

  it('when an image model is mapped to dall-e-3, then discovery lists no edits, no transparency and its 4,000-character prompt limit, as submission enforces', async () => {
    await withImageUpstream('gemforge-image-1=dall-e-3', {}, async (_fake, t) => {
      const u = await t.user({ gems: 10 });
      const caps = await listed(t, u.secret, 'gemforge-image-1');
      assert.equal(caps.sourceImage, undefined);
      assert.equal(caps.referenceImages, undefined);
      assert.deepEqual(caps.background, ['auto', 'opaque']);
      assert.equal(caps.maxPromptChars, 4000);
      const r = await submit(t, u.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'x', parameters: { background: 'transparent' } });
      assert.equal(r.status, 422, 'what discovery leaves out is refused');
    });
  });
});

describe('remote providers: fal queue video', () => {
  it('when a video model is a fal queue model, then its `{"video": {"url"}}` result is delivered once, and an image-to-video request is refused before anything is reserved', async () => {
    const fake = await startFakeFal({ apiKey: UPSTREAM_KEY, outputs: 'video' });
    const dir = tempDataDir();
    const catalog = catalogWith(dir, {
      'gemforge-video-1': (m) => {
        m.provider = 'fal';
        m.fal = { model: 'fal-ai/wan-t2v', input: { prompt: '{prompt}', aspect_ratio: '{ratio}', duration: '{duration}' } };
      },
    });
    const t = await startTestServer({
      env: { ...LOOPBACK_FETCH, CATALOG_PATH: catalog, FAL_QUEUE_URL: fake.url, FAL_KEY: UPSTREAM_KEY, FAL_POLL_MS: '50', WORKER_POLL_MS: '20' },
    });
    try {
      const u = await t.user({ gems: 1000 });
      const r = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'a queued clip',
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p', ratio: '16:9' },
      });
      const task = await waitForTask(t, u.secret, r.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.equal((await download(task.outputs[0]!.asset!.url)).type, 'video/mp4');
      assert.equal(fake.submitted().length, 1);
      assert.deepEqual(fake.submitted()[0]!.input, { prompt: 'a queued clip', aspect_ratio: '16:9', duration: 2 });
      assert.equal(fake.requests[0]!.headers.authorization, `Key ${UPSTREAM_KEY}`);
      const source = await uploadAsset(t, u.secret, await imageFixture('png', 64, 48), 'image/png');
      const i2v = await submit(t, u.secret, VIDEO, {
        model: 'gemforge-video-1',
        prompt: 'animate this',
        parameters: { mode: 'image-to-video', duration: 2, resolution: '480p', sourceImage: source },
      });
      assert.equal(i2v.status, 422);
      assert.match(i2v.body.error.message, /sourceImage/);
      assert.equal(fake.submitted().length, 1, 'nothing sent upstream');
    } finally {
      await t.close();
      await fake.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
