/**
 * One conformance suite for every registered remote provider: each descriptor
 * in server/providers/remote/index.ts runs the same fault matrix against its
 * fake (its harness in test/helpers/provider-harness.ts). The money rules:
 * exactly once upstream (no resend of a creating call whose outcome is
 * unknown), nothing charged for an output not delivered, the client's Gems
 * released for a refusal or a failed output and held only where the upstream
 * may have done paid work; no upstream key or upstream words reach the client.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REMOTE_PROVIDERS } from '../server/providers/remote/index.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { HARNESSES, UPSTREAM_KEY, type ProviderHarness, type Rig } from './helpers/provider-harness.ts';
import { submit, waitForTask, type TaskBody } from './helpers/tasks.ts';
import { until } from './helpers/poll.ts';
import { expireLeases } from './helpers/jobs.ts';
import type { TestServer } from './helpers/server.ts';

const GEMS = 1000;

/** The task, once it is terminal or its job is held for an operator. */
async function outcome(t: TestServer, key: string, id: string): Promise<{ task: TaskBody; held: boolean }> {
  return until(
    `task ${id} ends or is held`,
    async () => {
      const job = await t.db('jobs').where({ task_id: id }).first();
      const { task } = (await (await t.call('GET', `/api/generate/tasks/${id}`, { key })).json()) as { task: TaskBody };
      if (job?.state === 'held') return { task, held: true };
      return ['succeeded', 'failed', 'partial', 'cancelled'].includes(task.status) && { task, held: false };
    },
    30_000,
  );
}

/** Ledger charges (posts) of an account. */
async function charges(t: TestServer, accountId: string): Promise<number> {
  return (await t.db('ledger_entries').where({ account_id: accountId, type: 'post' })).length;
}

/** No Gem lost: charged only for a delivered output, the rest released or held, the ledger consistent. */
async function assertMoneyKept(t: TestServer, accountId: string, result: { task: TaskBody; held: boolean }): Promise<void> {
  const posted = await charges(t, accountId);
  if (result.task.status === 'succeeded') assert.equal(posted, 1, 'a delivered output is charged once');
  else assert.equal(posted, 0, 'no Gem charged for an undelivered output');
  if (result.task.status === 'failed') assert.equal(await ledger.balanceOf(t.db, accountId), GEMS, 'a failed output releases its Gems');
  assert.deepEqual((await verifyLedger(t.db, [verifyTasks])).problems, []);
}

/** Requests the fake received on `route` ('POST /v1/…/{id}' matched by method and shape). */
function calls(rig: Rig, route: string): number {
  const [method, template] = route.split(' ') as [string, string];
  const shape = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
  return rig.fake.requests.filter((q) => q.method === method && shape.test(q.path)).length;
}

async function withRig(
  h: ProviderHarness,
  env: Record<string, string>,
  body: (rig: Rig, user: { secret: string; accountId: string }) => Promise<void>,
  options: { slow?: boolean } = {},
): Promise<void> {
  const rig = await h.start(env, options);
  try {
    const user = await rig.t.user({ gems: GEMS });
    await body(rig, user);
  } finally {
    await rig.close();
  }
}

describe('provider conformance: every registered provider has a harness', () => {
  it('when the registry is read, then each descriptor has a harness and a distinct name', () => {
    const names = REMOTE_PROVIDERS.map((d) => d.name);
    assert.equal(new Set(names).size, names.length);
    assert.deepEqual(
      names.filter((n) => !HARNESSES.has(n)),
      [],
      'register a harness in test/helpers/provider-harness.ts',
    );
  });

  it('when docs/providers.md is read, then its per-provider table has a row for each registered provider', () => {
    const page = fs.readFileSync(path.resolve(import.meta.dirname, '../docs/providers.md'), 'utf8');
    const table = page.slice(page.indexOf('| Provider | Sent again |'));
    const firstCells = [...table.matchAll(/^\s*\| ([^|]+) \|/gm)].map((m) => m[1]!);
    const missing = REMOTE_PROVIDERS.map((d) => d.name).filter((n) => !firstCells.some((cell) => cell.includes(`\`${n}\``)));
    assert.deepEqual(missing, []);
  });
});

for (const descriptor of REMOTE_PROVIDERS) {
  const h = HARNESSES.get(descriptor.name);
  if (!h) continue;
  describe(`provider conformance: ${descriptor.name}`, () => {
    it('when a gateway answers 502 after the work was done, then the creating call is not sent again: at most one upstream job, no Gem lost', async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, { status: 502, afterWork: true });
        const r = await submit(rig.t, u.secret, h.path, h.request('done, then a gateway 502'));
        const result = await outcome(rig.t, u.secret, r.body.task.id);
        assert.equal(calls(rig, h.create), 1, 'never sent again');
        assert.ok(h.jobs(rig.fake) <= 1, `upstream jobs: ${h.jobs(rig.fake)}`);
        assert.ok(result.held, 'an unknown outcome is held for an operator');
        await assertMoneyKept(rig.t, u.accountId, result);
      });
    });

    it('when the connection is reset after the request was carried out, then it is not sent again: one upstream job, held, nothing charged', async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, { reset: true });
        const r = await submit(rig.t, u.secret, h.path, h.request('done, then reset'));
        const result = await outcome(rig.t, u.secret, r.body.task.id);
        assert.equal(calls(rig, h.create), 1);
        assert.equal(h.jobs(rig.fake), 1);
        assert.ok(result.held);
        await assertMoneyKept(rig.t, u.accountId, result);
      });
    });

    it('when the creating call is never answered, then it is not sent again and the task is held', async () => {
      await withRig(h, { REMOTE_ATTEMPT_TIMEOUT_SECONDS: '1' }, async (rig, u) => {
        rig.fake.fail(h.create, { hang: true });
        const r = await submit(rig.t, u.secret, h.path, h.request('lost create'));
        const result = await outcome(rig.t, u.secret, r.body.task.id);
        assert.equal(calls(rig, h.create), 1);
        assert.ok(result.held);
        await assertMoneyKept(rig.t, u.accountId, result);
      });
    });

    it('when the creating call answers a malformed 2xx, then its outcome is unknown (the work may be done and paid): not sent again, held, nothing charged', async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, { malformed: true });
        const r = await submit(rig.t, u.secret, h.path, h.request('a malformed 2xx'));
        const result = await outcome(rig.t, u.secret, r.body.task.id);
        assert.equal(calls(rig, h.create), 1, 'never sent again');
        assert.ok(result.held, 'an unknown outcome is held for an operator, not released');
        await assertMoneyKept(rig.t, u.accountId, result);
      });
    });

    it('when the creating call is throttled (429 without Retry-After), then nothing was done and it is sent again: one upstream job, delivered, charged once', async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, { status: 429 });
        const r = await submit(rig.t, u.secret, h.path, h.request('throttled create'));
        const task = await waitForTask(rig.t, u.secret, r.body.task.id);
        assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
        assert.equal(calls(rig, h.create), 2);
        assert.equal(h.jobs(rig.fake), 1);
        await assertMoneyKept(rig.t, u.accountId, { task, held: false });
      });
    });

    if (h.read) {
      it('when reads of the job are throttled, then they back off and the job is kept: one upstream job, delivered', async () => {
        await withRig(h, { REMOTE_DEADLINE_SECONDS: '60' }, async (rig, u) => {
          rig.fake.fail(h.read!, { status: 429 }, { status: 429 }, { status: 503 }, { status: 502 });
          const r = await submit(rig.t, u.secret, h.path, h.request('throttled reads'));
          const task = await waitForTask(rig.t, u.secret, r.body.task.id);
          assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
          assert.equal(h.jobs(rig.fake), 1);
          await assertMoneyKept(rig.t, u.accountId, { task, held: false });
        });
      });

      it('when the job runs past REMOTE_DEADLINE_SECONDS, then it is cancelled upstream and the output fails, nothing charged', async () => {
        await withRig(
          h,
          { REMOTE_DEADLINE_SECONDS: '1' },
          async (rig, u) => {
            const r = await submit(rig.t, u.secret, h.path, h.request('never finishes'));
            const task = await waitForTask(rig.t, u.secret, r.body.task.id);
            assert.equal(task.status, 'failed');
            assert.equal(h.canceled!(rig.fake), 1, 'not left running unpaid');
            await assertMoneyKept(rig.t, u.accountId, { task, held: false });
          },
          { slow: true },
        );
      });
    }

    it('when the upstream refuses the request (400), then the output fails at once with the shared sentence, its Gems released', async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, { status: 400 });
        const r = await submit(rig.t, u.secret, h.path, h.request('refused'));
        const task = await waitForTask(rig.t, u.secret, r.body.task.id);
        assert.equal(task.status, 'failed');
        assert.match(task.error!.message, /refused the request \(HTTP 400\); nothing was charged/);
        assert.equal(calls(rig, h.create), 1, 'a refusal is not sent again');
        await assertMoneyKept(rig.t, u.accountId, { task, held: false });
      });
    });

    if (h.contentPolicyPrompt) {
      it('when the upstream refuses under its content policy, then the output fails saying so, its Gems released', async () => {
        await withRig(h, {}, async (rig, u) => {
          const r = await submit(rig.t, u.secret, h.path, h.request(h.contentPolicyPrompt!));
          const task = await waitForTask(rig.t, u.secret, r.body.task.id);
          assert.equal(task.status, 'failed');
          assert.match(task.error!.message, /content policy/);
          await assertMoneyKept(rig.t, u.accountId, { task, held: false });
        });
      });
    }

    it("when the upstream's error carries its key and its own words, then neither reaches the client", async () => {
      await withRig(h, {}, async (rig, u) => {
        rig.fake.fail(h.create, {
          status: 403,
          body: JSON.stringify({ error: { message: `key ${UPSTREAM_KEY} is internal-upstream-words at ${rig.fake.url}` }, detail: UPSTREAM_KEY }),
        });
        const r = await submit(rig.t, u.secret, h.path, h.request('leaky refusal'));
        await waitForTask(rig.t, u.secret, r.body.task.id);
        const text = await (await rig.t.call('GET', `/api/generate/tasks/${r.body.task.id}`, { key: u.secret })).text();
        for (const secret of [UPSTREAM_KEY, 'internal-upstream-words', rig.fake.url]) assert.ok(!text.includes(secret), `the task shows ${secret}`);
      });
    });

    for (const [what, fault, env] of [
      ['an HTML page served as media', { html: true }, {}],
      ['an output over REMOTE_OUTPUT_MAX_BYTES', { oversize: 64 * 1024 }, { REMOTE_OUTPUT_MAX_BYTES: '16384' }],
    ] as const) {
      it(`when the upstream delivers ${what}, then the output fails, nothing charged, and it is not made again`, async () => {
        await withRig(h, env, async (rig, u) => {
          rig.fake.fail(h.media, fault);
          const r = await submit(rig.t, u.secret, h.path, h.request(`spoiled: ${what}`));
          const task = await waitForTask(rig.t, u.secret, r.body.task.id);
          assert.equal(task.status, 'failed');
          assert.match(task.error!.message, /nothing was charged/);
          assert.equal(h.jobs(rig.fake), 1, 'a 2xx means the work was done: not asked again');
          await assertMoneyKept(rig.t, u.accountId, { task, held: false });
        });
      });
    }

    it('when the server stops mid-job and restarts, then the job resumes without a second creating call: delivered once or held, never charged twice', async () => {
      await withRig(
        h,
        { WORKER_LEASE_MS: '1000', WORKER_RETRY_BACKOFF_MS: '0' },
        async (rig, u) => {
          if (!h.async) rig.fake.fail(h.create, { hang: true });
          const r = await submit(rig.t, u.secret, h.path, h.request('interrupted mid-job'));
          await until('the creating call reached the upstream', () => calls(rig, h.create) === 1 && (!h.read || calls(rig, h.read) > 0), 20_000);
          await rig.t.close();
          await expireLeases(rig.t.dataDir);
          const t2 = await rig.restart();
          if (h.read) {
            const reads = calls(rig, h.read);
            await until('the resumed job reads the same upstream job', () => calls(rig, h.read!) > reads, 20_000);
            h.finishAll!(rig.fake);
          }
          const result = await outcome(t2, u.secret, r.body.task.id);
          assert.equal(calls(rig, h.create), 1, 'never created twice');
          if (h.async) assert.equal(result.task.status, 'succeeded', JSON.stringify(result.task.error));
          else assert.ok(result.held, 'a synchronous call cut mid-flight is held for an operator');
          await assertMoneyKept(t2, u.accountId, result);
        },
        { slow: true },
      );
    });
  });
}
