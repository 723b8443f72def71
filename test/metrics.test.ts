/**
 * Prometheus metrics: served only where an operator asked
 * (METRICS_TOKEN on the main port, or METRICS_PORT), with requests by operation
 * and status, tasks, the job queue, held Gems and the process.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from './helpers/server.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { loadConfig } from '../server/config.ts';

const TOKEN = 'metrics-token-for-tests-only';

describe('metrics', () => {
  it('when neither METRICS_TOKEN nor METRICS_PORT is set, then /metrics is not served', async () => {
    const s = await startTestServer();
    try {
      assert.equal((await fetch(`${s.url}/metrics`)).status, 404);
      assert.equal(s.metricsUrl, undefined);
    } finally {
      await s.close();
    }
  });

  it('when METRICS_TOKEN is set, then /metrics needs it and counts requests, tasks, jobs and held Gems', async () => {
    const s = await startTestServer({ env: { METRICS_TOKEN: TOKEN, WORKER_POLL_MS: '20' } });
    try {
      assert.equal((await fetch(`${s.url}/metrics`)).status, 401);
      assert.equal((await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status, 401);
      const u = await s.user({ gems: 100 });
      const r = await submit(s, u.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a counted fox', parameters: { resolution: '512' } });
      await waitForTask(s, u.secret, r.body.task.id);
      await submit(s, u.secret, '/api/generate/image', {
        model: 'gemforge-image-1',
        prompt: 'a waiting fox [[scenario:processing:30]]',
        parameters: { resolution: '512' },
      });
      const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
      const text = await res.text();
      assert.match(text, /gemforge_http_requests_total\{operation="createImage",status="202"\} 2/);
      assert.match(text, /gemforge_http_request_duration_seconds_bucket\{le="[0-9.]+",operation="getTask"\}/);
      assert.match(text, /gemforge_tasks\{status="succeeded"\} 1/);
      assert.match(text, /gemforge_jobs\{lane="local",state="(running|queued)"\} 1/);
      assert.match(text, /gemforge_reserved_gems [1-9]/);
      assert.match(text, /gemforge_oldest_queued_job_age_seconds /);
      assert.match(text, /gemforge_upstream_errors_total/);
      assert.match(text, /gemforge_process_resident_memory_bytes /);
      assert.ok(!text.includes(u.secret), 'no key in the metrics');
    } finally {
      await s.close();
    }
  });

  it('when METRICS_PORT is set, then metrics have a listener of their own and the main port does not serve them', async () => {
    const s = await startTestServer({ env: { METRICS_PORT: '0' } });
    try {
      assert.ok(s.metricsUrl);
      const res = await fetch(`${s.metricsUrl}/metrics`);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /gemforge_http_requests_total|gemforge_tasks/);
      assert.equal((await fetch(`${s.metricsUrl}/other`)).status, 404);
      assert.equal((await fetch(`${s.url}/metrics`)).status, 404);
    } finally {
      await s.close();
    }
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN must be at least 16 characters/);
    assert.throws(() => loadConfig({ METRICS_PORT: 'x' }), /METRICS_PORT must be an integer/);
  });
});
