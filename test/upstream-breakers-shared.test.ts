/**
 * Breakers shared between processes: the media upstreams are called by a
 * separate `gemforge worker`, whose breakers open as every deployment refuses;
 * the API (its own breakers untouched, WORKER_ENABLED=false) learns of them
 * through the database and refuses new media work with 503
 * PROVIDER_UNAVAILABLE and Retry-After before anything is claimed. /metrics
 * and `gemforge admin providers` show the shared state.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { until } from './helpers/poll.ts';
import { adminWithEnv } from './helpers/admin.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { catalogWith, refusingUrl } from './helpers/deployments.ts';
import { dbEnvFor } from './helpers/database.ts';
import { workerChild } from './helpers/worker-child.ts';

describe('several upstreams per media model, with the worker apart', () => {
  let s: TestServer;
  let w: ReturnType<typeof workerChild>;
  let key: string;
  let dir: string;
  let env: Record<string, string>;
  before(async () => {
    dir = tempDataDir();
    const catalog = catalogWith(
      dir,
      [
        { id: 'primary', provider: 'openai-images', url: await refusingUrl(), model: 'gpt-image-1', key: 'a', priority: 1 },
        { id: 'secondary', provider: 'openai-images', url: await refusingUrl(), model: 'gpt-image-1', key: 'b' },
      ],
      'gemforge-image-1',
    );
    env = {
      CATALOG_PATH: catalog,
      UPSTREAM_KEYS: 'a=key-images-a-0001,b=key-images-b-0001',
      BREAKER_FAILURES: '1',
      // Far longer than the test: the breakers stay open once opened.
      BREAKER_COOLDOWN_SECONDS: '600',
      REMOTE_DEADLINE_SECONDS: '3',
      REMOTE_ATTEMPT_TIMEOUT_SECONDS: '3',
      METRICS_TOKEN: 'metrics-token-1234567890',
    };
    s = await startTestServer({ env: { ...env, WORKER_ENABLED: 'false' } });
    w = workerChild({ ...env, ...(await dbEnvFor(s.dataDir)), WORKER_POLL_MS: '20' });
    key = (await s.user({ gems: 1000 })).secret;
  });
  after(async () => {
    w.stop();
    await w.exited;
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const image = (prompt: string) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });

  it("when the worker's breakers open for every deployment, then the API answers 503 PROVIDER_UNAVAILABLE with Retry-After before anything is claimed, and shows them open", async () => {
    let tries = 0;
    const refused = await until(
      'the API sees the worker’s open breakers',
      async () => {
        const r = await submit(s, key, '/api/generate/image', image('in the storm'), `shared-outage-${process.pid}-${++tries}`);
        if (r.status === 202) {
          // Taken before the worker's breakers opened: the worker fails it (nothing charged); ask again with a new identity.
          await waitForTask(s, key, r.body.task.id);
          return false;
        }
        return r;
      },
      60_000,
    );
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'PROVIDER_UNAVAILABLE');
    assert.match(refused.body.error.message, /nothing was claimed/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter > 1 && retryAfter <= 600, String(retryAfter));
    assert.equal(await s.db('idempotency_records').where({ idem_key: refused.idemKey }).first(), undefined, 'the refused identity was not claimed');

    // The API never called an upstream: what it shows is the worker's state, read from the database.
    const views = s.deployments.views().filter((v) => v.model === 'gemforge-image-1');
    assert.deepEqual(
      views.map((v) => [v.deployment, v.state, v.stats.calls]),
      [
        ['primary', 'open', 0],
        ['secondary', 'open', 0],
      ],
    );
    const metrics = await (await s.call('GET', '/metrics', { key: env.METRICS_TOKEN })).text();
    assert.match(metrics, /gemforge_upstream_breaker_state\{model="gemforge-image-1",deployment="primary",provider="openai-images"\} 1/);
    assert.match(metrics, /gemforge_upstream_breaker_open_until_seconds\{model="gemforge-image-1",deployment="secondary",provider="openai-images"\} [1-9]/);

    const r = await adminWithEnv(s.dataDir, env, 'providers');
    assert.equal(r.code, 0, r.stderr);
    const model = (r.json as Array<{ model: string; deployments?: Array<{ id: string; shared: { state: string; openUntil?: string } }> }>).find(
      (m) => m.model === 'gemforge-image-1',
    )!;
    assert.deepEqual(
      model.deployments!.map((d) => [d.id, d.shared.state]),
      [
        ['primary', 'open'],
        ['secondary', 'open'],
      ],
    );
    assert.ok(Date.parse(model.deployments![0]!.shared.openUntil!) > Date.now());
  });
});
