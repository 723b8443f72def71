/**
 * `admin ledger verify` reads one consistent snapshot: run
 * again and again while the worker settles tasks, it never reports a problem
 * that is only a settlement half-seen between two of its reads.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from './helpers/server.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

describe('ledger verify under settlements', () => {
  it('when tasks settle while the ledger is verified over and over, then every report is clean', async () => {
    const s = await startTestServer({ env: { WORKER_POLL_MS: '10', WORKER_CONCURRENCY: '4' } });
    try {
      const u = await s.user({ gems: 10_000 });
      const ids: string[] = [];
      for (let i = 0; i < 24; i++) {
        ids.push(
          (
            await submit(s, u.secret, '/api/generate/image', {
              model: 'gemforge-image-1',
              prompt: `settle ${i}${i % 3 === 0 ? ' [[scenario:fail]]' : ''}`,
              parameters: { resolution: '512', outputCount: 2 },
            })
          ).body.task.id,
        );
      }
      let runs = 0;
      const settled = Promise.all(ids.map((id) => waitForTask(s, u.secret, id)));
      let done = false;
      void settled.then(() => (done = true));
      while (!done) {
        const report = await verifyLedger(s.db, [verifyTasks]);
        assert.deepEqual(report.problems, [], `run ${runs}`);
        runs++;
      }
      assert.ok(runs > 0);
      assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
    } finally {
      await s.close();
    }
  });
});
