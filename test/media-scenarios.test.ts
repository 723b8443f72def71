/**
 * Scenario triggers drive a media task into every state of the contract on
 * purpose, and every one settles exactly (charged + released = quoted).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, newKey, submit, waitForTask } from './helpers/tasks.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { systemClock } from '../server/domain/clock.ts';
import { defaultMediaProviders } from '../server/providers/media.ts';
import type { MediaProvider } from '../server/providers/media-types.ts';

const IMAGE = '/api/generate/image';
const body = (prompt: string, parameters: Record<string, unknown> = {}) => ({
  model: 'gemforge-image-1',
  prompt,
  parameters: { resolution: '512', ...parameters },
});

describe('media scenario triggers', () => {
  let s: TestServer;
  let user: { accountId: string; keyId: string; secret: string };
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    user = await s.user({ gems: 1000 });
  });
  after(() => s.close());

  it('when the prompt carries [[scenario:fail]], then the task fails with a sanitized error and nothing is charged', async () => {
    const sub = await submit(s, user.secret, IMAGE, body('a cat [[scenario:fail]]', { outputCount: 2 }));
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'failed');
    assert.deepEqual(Object.keys(task.error!).sort(), ['code', 'message']);
    assert.equal(task.error!.code, 'GENERATION_FAILED');
    assert.equal(task.chargedGems, 0);
    assert.equal(task.releasedGems, 4);
    assert.ok(task.outputs.every((o) => o.status === 'failed' && o.asset === null));
    assertSettled(task);
  });

  it('when the prompt carries [[scenario:partial]], then the first output succeeds, the rest fail, and only it is charged', async () => {
    const sub = await submit(s, user.secret, IMAGE, body('a dog [[scenario:partial]]', { outputCount: 3 }));
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'partial');
    assert.deepEqual(
      task.outputs.map((o) => o.status),
      ['succeeded', 'failed', 'failed'],
    );
    assert.ok(task.outputs[0].asset);
    assert.equal(task.outputs[1].asset, null);
    assert.equal(task.chargedGems, 2);
    assert.equal(task.releasedGems, 4);
    assert.equal(task.error?.code, 'PARTIAL_FAILURE');
    assertSettled(task);

    const single = await submit(s, user.secret, IMAGE, body('one [[scenario:partial]]'));
    const one = await waitForTask(s, user.secret, single.body.task.id);
    assert.equal(one.status, 'partial');
    assert.equal(one.outputs.length, 2, 'a single-output task gets an alternate take that fails');
    assert.equal(one.chargedGems, 1);
    assertSettled(one);
  });

  it('when the prompt carries [[scenario:processing:2]], then the task stays processing about 2 s, then succeeds', async () => {
    const started = Date.now();
    const sub = await submit(s, user.secret, IMAGE, body('slow [[scenario:processing:2]]'));
    let seen = '';
    while (Date.now() - started < 1500) {
      const res = await s.call('GET', `/api/generate/tasks/${sub.body.task.id}`, { key: user.secret });
      seen = ((await res.json()) as { task: { status: string } }).task.status;
      if (seen === 'processing') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(seen, 'processing');
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'succeeded');
    assert.ok(Date.now() - started >= 1900);
    assertSettled(task);
  });

  it('when the prompt carries [[scenario:cancel]], then the task ends cancelled with nothing charged', async () => {
    const sub = await submit(s, user.secret, IMAGE, body('never mind [[scenario:cancel]]'));
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'cancelled');
    assert.equal(task.error?.code, 'CANCELLED');
    assert.equal(task.chargedGems, 0);
    assertSettled(task);
  });

  it('when the prompt carries [[scenario:uncertain]], then the submission and every replay answer REQUEST_UNCERTAIN and the reservation stays held', async () => {
    const before = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
    const idemKey = newKey('uncertain');
    const first = await submit(s, user.secret, IMAGE, body('lost [[scenario:uncertain]]'), idemKey);
    assert.equal(first.status, 409);
    assert.equal(first.body.error.code, 'REQUEST_UNCERTAIN');
    for (let i = 0; i < 3; i++) {
      const replay = await submit(s, user.secret, IMAGE, body('lost [[scenario:uncertain]]'), idemKey);
      assert.equal(replay.status, 409);
      assert.equal(replay.body.error.code, 'REQUEST_UNCERTAIN');
    }
    const afterwards = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
    assert.equal(afterwards.outstandingReservations.count, before.outstandingReservations.count + 1, 'one reservation held, no automatic release');
    assert.equal(afterwards.balance, before.balance - 2);
  });

  it('when the prompt carries [[scenario:provider-unavailable]], then 503 PROVIDER_UNAVAILABLE with nothing reserved, and the identity stays free', async () => {
    const before = await ledger.balanceOf(s.db, user.accountId);
    const idemKey = newKey('unavailable');
    const res = await submit(s, user.secret, IMAGE, body('busy [[scenario:provider-unavailable]]'), idemKey);
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, 'PROVIDER_UNAVAILABLE');
    assert.equal(await ledger.balanceOf(s.db, user.accountId), before);
    const again = await submit(s, user.secret, IMAGE, body('busy [[scenario:provider-unavailable]]'), idemKey);
    assert.equal(again.status, 503, 'a retry with the same identity is admitted again, not treated as uncertain');
  });

  it('when the prompt carries [[scenario:references-processing]] with a reference, then 409 REFERENCES_PROCESSING and nothing is reserved', async () => {
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
    const up = await fetch(new URL('/api/generate/assets', s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${user.secret}`, 'content-type': 'image/png' },
      body: png,
    });
    assert.equal(up.status, 201);
    const asset = ((await up.json()) as { asset: { id: string } }).asset.id;
    const before = await ledger.balanceOf(s.db, user.accountId);
    const res = await submit(s, user.secret, IMAGE, { ...body('wait [[scenario:references-processing]]'), referenceAssetIds: [asset] });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'REFERENCES_PROCESSING');
    assert.equal(await ledger.balanceOf(s.db, user.accountId), before);
  });

  it('when scenarios run, then ledger verify holds', async () => {
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
  });
});

describe('scenario triggers switched off', () => {
  it('when SCENARIOS_ENABLED=false, then a marker is ordinary prompt text', async () => {
    const s = await startTestServer({ env: { WORKER_POLL_MS: '20', SCENARIOS_ENABLED: 'false' } });
    try {
      const user = await s.user();
      const sub = await submit(s, user.secret, IMAGE, body('a cat [[scenario:fail]]'));
      const task = await waitForTask(s, user.secret, sub.body.task.id);
      assert.equal(task.status, 'succeeded');
    } finally {
      await s.close();
    }
  });
});

describe('submission hooks of the model’s provider (no marker at all)', () => {
  // What the scenario layer does with its cards, a provider does with its own hooks:
  // the submission use case asks them, it does not look for markers.
  let s: TestServer;
  let user: { accountId: string; keyId: string; secret: string };
  let open = false;
  let lose = false;
  const local = defaultMediaProviders().image!;
  const breaker: MediaProvider<'image'> = {
    name: 'breaker',
    resume: local.resume,
    generate: (job, tools) => local.generate(job, tools),
    admit: () => open,
    slots: (_s, n) => n * 2,
    dispatchOutcome: () => (lose ? 'lost' : 'known'),
  };
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' }, providers: { ...defaultMediaProviders(), image: breaker } });
    user = await s.user({ gems: 1000 });
  });
  after(() => s.close());

  it('when the provider’s pre-flight refuses (a circuit breaker), then 503 PROVIDER_UNAVAILABLE with nothing claimed, and the identity may be retried', async () => {
    const before = await ledger.balanceOf(s.db, user.accountId);
    const idemKey = newKey('breaker');
    const res = await submit(s, user.secret, IMAGE, body('a plain prompt'), idemKey);
    assert.deepEqual([res.status, res.body.error.code], [503, 'PROVIDER_UNAVAILABLE']);
    assert.equal(await ledger.balanceOf(s.db, user.accountId), before);
    open = true;
    const again = await submit(s, user.secret, IMAGE, body('a plain prompt'), idemKey);
    assert.equal(again.status, 202, 'admitted once the breaker closes');
    assert.equal(again.body.task.outputs.length, 2, 'split over the slots the provider makes');
  });

  it('when the provider says a dispatch’s outcome is lost, then REQUEST_UNCERTAIN now and on replay, the reservation held', async () => {
    open = true;
    lose = true;
    const before = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
    const idemKey = newKey('lost');
    for (let i = 0; i < 2; i++) {
      const res = await submit(s, user.secret, IMAGE, body('another plain prompt'), idemKey);
      assert.deepEqual([res.status, res.body.error.code], [409, 'REQUEST_UNCERTAIN']);
    }
    const afterwards = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
    assert.equal(afterwards.outstandingReservations.count, before.outstandingReservations.count + 1, 'one reservation held');
  });
});
