/**
 * An operator who can see outages: /metrics serves what it can while the
 * database is down (each database collector on its own, their failures
 * counted); `gemforge worker` serves /metrics and /healthz on its own port
 * (WORKER_METRICS_PORT); a worker started without a reachable database says
 * so in one line, and knex's own warnings reach the log as JSON lines.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tempDataDir } from './helpers/server.ts';
import { workerChild as worker } from './helpers/worker-child.ts';
import { until } from './helpers/poll.ts';
import { openDb } from '../server/storage/db.ts';
import { systemClock } from '../server/domain/clock.ts';
import { createServerMetrics } from '../server/http/metrics.ts';

describe('outages: what an operator sees', () => {
  it('when the database is down, then /metrics still answers with the process metrics and counts each collector that failed', async () => {
    const dir = tempDataDir();
    try {
      const db = await openDb({ dataDir: dir });
      const metrics = createServerMetrics(db, systemClock);
      assert.match(await metrics.text(), /gemforge_tasks/);
      await db.destroy(); // the database is gone from here on
      const text = await metrics.text();
      assert.match(text, /gemforge_process_resident_memory_bytes /);
      assert.match(text, /gemforge_metrics_collection_failures_total\{collector="tasks"\} 1/);
      assert.match(text, /gemforge_metrics_collection_failures_total\{collector="reserved_gems"\} 1/);
      assert.match(text, /# TYPE gemforge_store_errors_total counter/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when gemforge worker starts without a reachable database, then it prints one line and exits 1, and knex’s warnings are JSON log lines', async () => {
    const dir = tempDataDir();
    try {
      const w = worker({ DATA_DIR: dir, DATABASE_URL: 'postgres://nobody:nothing@127.0.0.1:1/none' });
      assert.equal(await w.exited, 1);
      const lines = w.stderr().trim().split('\n');
      assert.equal(lines.length, 1, `one line on stderr: ${w.stderr()}`);
      assert.match(lines[0]!, /^gemforge: failed to start: .*ECONNREFUSED/);
      for (const line of w.stdout().trim().split('\n').filter(Boolean)) assert.doesNotThrow(() => JSON.parse(line), `a JSON log line: ${line}`);
      assert.match(w.stdout(), /"source":"knex".*Acquire connection error/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when gemforge worker runs with WORKER_METRICS_PORT, then it serves /healthz and its job and store-error metrics there', async () => {
    const dir = tempDataDir();
    const w = worker({ DATA_DIR: dir, WORKER_METRICS_PORT: '0', WORKER_POLL_MS: '20' });
    try {
      const url = await until('the worker metrics listener', () => /"url":"(http:\/\/[^"]+)".*worker metrics listening/.exec(w.stdout())?.[1], 60_000);
      const health = await fetch(`${url}/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: 'ok' });
      const text = await (await fetch(`${url}/metrics`)).text();
      assert.match(text, /# TYPE gemforge_worker_jobs_total counter/);
      assert.match(text, /# TYPE gemforge_store_errors_total counter/);
      assert.match(text, /gemforge_process_resident_memory_bytes /);
      w.stop();
      assert.equal(await w.exited, 0);
    } finally {
      w.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
