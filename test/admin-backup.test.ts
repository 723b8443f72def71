/**
 * `gemforge admin backup PATH`: an online copy of the
 * embedded SQLite database taken while the server runs, proven by restoring it:
 * a server started on the copy (with the blob store beside it) serves the same
 * accounts, tasks and outputs, and the ledger verifies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startTestServer, tempDataDir } from './helpers/server.ts';
import { admin } from './helpers/admin.ts';
import { download, submit, waitForTask } from './helpers/tasks.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

describe('admin backup', () => {
  it(
    'when the database is backed up while the server runs, then a server restored from the copy serves the same data',
    { skip: process.env.TEST_DATABASE_URL ? 'SQLite only (Postgres: pg_dump)' : false },
    async () => {
      const s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
      const restored = tempDataDir();
      try {
        const u = await s.user({ gems: 500 });
        const task = await waitForTask(
          s,
          u.secret,
          (await submit(s, u.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a backed-up fox', parameters: { resolution: '512' } })).body
            .task.id,
        );
        assert.equal(task.status, 'succeeded');
        const file = path.join(restored, 'gemforge.sqlite');
        const run = await admin(s.dataDir, 'backup', file);
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.json.file, file);
        assert.ok(run.json.bytes > 0);
        assert.equal((await admin(s.dataDir, 'backup', file)).code, 2, 'an existing file is never overwritten');
        fs.cpSync(path.join(s.dataDir, 'blobs'), path.join(restored, 'blobs'), { recursive: true });

        const r = await startTestServer({ dataDir: restored, env: { WORKER_ENABLED: 'false' } });
        try {
          assert.equal(await ledger.balanceOf(r.db, u.accountId), await ledger.balanceOf(s.db, u.accountId));
          const res = await r.call('GET', `/api/generate/tasks/${task.id}`, { key: u.secret });
          assert.equal(res.status, 200, 'the key and the task came along');
          const view = ((await res.json()) as { task: typeof task }).task;
          assert.equal(view.status, 'succeeded');
          const original = await download(task.outputs[0]!.asset!.url);
          const copy = await download(view.outputs[0]!.asset!.url);
          assert.equal(copy.status, 200);
          assert.ok(copy.bytes.equals(original.bytes), 'the output opens from the restored installation');
          assert.deepEqual((await verifyLedger(r.db, [verifyTasks])).problems, []);
        } finally {
          await r.close();
        }
      } finally {
        await s.close();
        fs.rmSync(restored, { recursive: true, force: true });
      }
    },
  );
});
