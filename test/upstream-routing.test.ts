/**
 * Several upstreams for one model (a catalog entry's `deployments:`), at the
 * real server: a deployment that refuses connections is passed over for the
 * next one, and when every deployment's breaker is open a submission is
 * answered 503 PROVIDER_UNAVAILABLE with Retry-After before anything is
 * claimed, so the same identity is served once an upstream is back.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expectError, startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { until } from './helpers/poll.ts';
import { adminWithEnv } from './helpers/admin.ts';
import { startFakeOpenAiImages, type FakeOpenAiImages } from './helpers/fake-upstreams.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { catalogWith, refusingUrl } from './helpers/deployments.ts';

const PATH = '/api/generate/text/v1/chat/completions';

/** A fake OpenAI-compatible chat server answering one JSON completion; `down` makes it answer 503. */
async function fakeChat(name: string): Promise<{ url: string; seen: string[]; state: { down: boolean }; close(): Promise<void> }> {
  const seen: string[] = [];
  const state = { down: false };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { model: string };
      seen.push(`${body.model} ${req.headers.authorization ?? ''}`);
      if (state.down) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'overloaded' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };
      res.end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: `from ${name}` }, finish_reason: 'stop' }],
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    state,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

describe('several upstreams per text model', () => {
  let s: TestServer;
  let healthy: Awaited<ReturnType<typeof fakeChat>>;
  let key: string;
  let dir: string;
  let env: Record<string, string>;
  before(async () => {
    healthy = await fakeChat('b');
    dir = tempDataDir();
    const catalog = catalogWith(dir, [
      { id: 'primary', provider: 'openai-chat', url: await refusingUrl(), model: 'model-a', key: 'a', priority: 1 },
      { id: 'secondary', provider: 'openai-chat', url: healthy.url, model: 'model-b', keys: ['b1', 'b2'] },
    ]);
    env = {
      CATALOG_PATH: catalog,
      UPSTREAM_KEYS: 'a=key-a-0001,b1=key-b1-0001,b2=key-b2-0001',
      BREAKER_FAILURES: '2',
      BREAKER_COOLDOWN_SECONDS: '1',
      METRICS_TOKEN: 'metrics-token-1234567890',
    };
    s = await startTestServer({ env });
    key = (await s.user({ llmAllowance: 10_000 })).secret;
  });
  after(async () => {
    await s.close();
    await healthy.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ask = (idemKey: string) =>
    s.call('POST', PATH, { key, body: { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hello' }] }, headers: { 'idempotency-key': idemKey } });

  it('when the preferred upstream refuses connections, then the model keeps serving from the other, its key pool used in turn', async () => {
    for (let i = 0; i < 4; i++) {
      const res = await ask(`fallback-${i}`);
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
      assert.equal(body.choices[0]!.message.content, 'from b');
    }
    assert.deepEqual(healthy.seen.slice(0, 4), [
      'model-b Bearer key-b1-0001',
      'model-b Bearer key-b2-0001',
      'model-b Bearer key-b1-0001',
      'model-b Bearer key-b2-0001',
    ]);
  });

  it('when every upstream is down, then a submission is answered 503 PROVIDER_UNAVAILABLE with Retry-After and the same identity is served once one is back', async () => {
    healthy.state.down = true;
    // Failures open both breakers (the refusing one is open already, or half-open again).
    const refused = await until('both breakers open', async () => {
      const res = await ask('outage-1');
      if (res.status !== 503) return false;
      const retryAfter = res.headers.get('retry-after');
      const message = await expectError(res, 503, 'PROVIDER_UNAVAILABLE');
      return /nothing was claimed/.test(message) && retryAfter;
    });
    assert.ok(Number(refused) >= 1);
    const metrics = await s.call('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-1234567890' } });
    const exposition = await metrics.text();
    assert.match(exposition, /gemforge_upstream_breaker_state\{model="gemforge-text-1",deployment="secondary",provider="openai-chat"\} 1/);
    assert.match(exposition, /gemforge_upstream_deployment_errors_total\{model="gemforge-text-1",deployment="primary",provider="openai-chat"\} [1-9]/);
    healthy.state.down = false;
    // Once the cooldown passes, a probe goes through and the same identity is served.
    const served = await until('the identity is served again', async () => {
      const res = await ask('outage-1');
      return res.status === 200 ? ((await res.json()) as { choices: Array<{ message: { content: string } }> }) : (await res.body?.cancel(), false);
    });
    assert.equal(served.choices[0]!.message.content, 'from b');
  });

  it('when an operator asks, then gemforge admin providers lists the deployments with what the server reports of each (never a key)', async () => {
    const r = await adminWithEnv(s.dataDir, env, 'providers', '--metrics', `${s.url}/metrics`);
    assert.equal(r.code, 0, r.stderr);
    const text = (r.json as Array<{ model: string; deployments?: Array<Record<string, unknown> & { live: Array<Record<string, unknown>> }> }>).find(
      (m) => m.model === 'gemforge-text-1',
    )!;
    assert.deepEqual(
      text.deployments!.map((d) => [d.id, d.provider, d.upstreamModel, d.priority, d.weight, d.keys]),
      [
        ['primary', 'openai-chat', 'model-a', 1, 1, 1],
        ['secondary', 'openai-chat', 'model-b', 0, 1, 2],
      ],
    );
    const [primary, secondary] = text.deployments!.map((d) => d.live[0]!);
    assert.ok((primary.errors as number) >= 1 && primary.errors === primary.calls, JSON.stringify(primary));
    assert.ok((secondary.calls as number) > (secondary.errors as number), JSON.stringify(secondary));
    assert.ok(['closed', 'open', 'half-open'].includes(secondary.state as string));
    assert.doesNotMatch(JSON.stringify(r.json), /key-(a|b1|b2)-0001/);
  });
});

describe('several upstreams per media model', () => {
  const GENERATIONS = 'POST /v1/images/generations';
  let s: TestServer;
  let fake: FakeOpenAiImages;
  let key: string;
  let dir: string;
  before(async () => {
    fake = await startFakeOpenAiImages({ apiKey: 'key-images-b-0001' });
    dir = tempDataDir();
    const catalog = catalogWith(
      dir,
      [
        { id: 'primary', provider: 'openai-images', url: await refusingUrl(), model: 'gpt-image-1', key: 'a', priority: 1 },
        { id: 'secondary', provider: 'openai-images', url: fake.url, model: 'gpt-image-1', key: 'b', weight: 2 },
      ],
      'gemforge-image-1',
    );
    s = await startTestServer({
      env: {
        CATALOG_PATH: catalog,
        UPSTREAM_KEYS: 'a=key-images-a-0001,b=key-images-b-0001',
        BREAKER_FAILURES: '1',
        // Longer than a failing task takes, so both breakers are open together.
        BREAKER_COOLDOWN_SECONDS: '8',
        // Room for a loaded machine: an attempt cut by the deadline has an unknown outcome (the task is held).
        REMOTE_DEADLINE_SECONDS: '3',
        REMOTE_ATTEMPT_TIMEOUT_SECONDS: '3',
        WORKER_POLL_MS: '20',
      },
    });
    key = (await s.user({ gems: 1000 })).secret;
  });
  after(async () => {
    await s.close();
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const image = (prompt: string) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });

  it('when the preferred upstream refuses connections, then the output is made by the other, recorded under it before the call', async () => {
    const r = await submit(s, key, '/api/generate/image', image('a lighthouse'));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const task = await waitForTask(s, key, r.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const calls = fake.requests.filter((q) => q.path === '/v1/images/generations');
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.headers.authorization, 'Bearer key-images-b-0001');
    const records = (await s.db('remote_calls').where({ task_id: r.body.task.id })) as Array<{ provider: string }>;
    assert.deepEqual(
      records.map((row) => row.provider),
      ['openai-images@secondary#0'],
    );
  });

  it('when every upstream is down, then a submission is answered 503 PROVIDER_UNAVAILABLE with Retry-After before anything is claimed, and the same identity is taken once one is back', async () => {
    fake.fail(GENERATIONS, ...Array.from({ length: 500 }, () => ({ status: 503 })));
    let tries = 0;
    const refused = await until('both breakers open', async () => {
      const r = await submit(s, key, '/api/generate/image', image('in the storm'), `media-outage-${process.pid}-${++tries}`);
      if (r.status === 202) {
        // Taken while a breaker was still closed: it fails (nothing charged), and its identity is spent; ask again with a new one.
        await waitForTask(s, key, r.body.task.id);
        return false;
      }
      return r;
    });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'PROVIDER_UNAVAILABLE');
    assert.match(refused.body.error.message, /nothing was claimed/);
    // Until the first breaker lets a probe through: at most the cooldown of 8 s.
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 8, String(retryAfter));
    fake.recover(GENERATIONS);
    // Once both cooldowns pass, each breaker lets one probe through: the identity is admitted and its slot served.
    await until('both breakers half-open', () =>
      s.deployments
        .views()
        .filter((v) => v.model === 'gemforge-image-1')
        .every((v) => v.state === 'half-open'),
    );
    const taken = await until('the identity is taken again', async () => {
      const r = await submit(s, key, '/api/generate/image', image('in the storm'), refused.idemKey);
      return r.status === 202 && r;
    });
    const task = await waitForTask(s, key, taken.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  });
});
