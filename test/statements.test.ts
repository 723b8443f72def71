/**
 * Round trips per request (issue 13): authentication reads a key with its
 * account in one statement, or none while the key is cached; a task read is one
 * statement whatever its outputs; the models list and a missing key need none.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { dropDatabaseFor } from './helpers/database.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { onStatement } from '../server/storage/reads.ts';
import { PRINCIPAL_TTL_MS } from '../server/domain/principal-cache.ts';

describe('statements per request', () => {
  const dataDir = tempDataDir();
  let s: TestServer;
  let user: { secret: string };
  let taskId: string;
  let statements: string[] = [];
  before(async () => {
    // A task generated to the end by one server; then the one counted, without a polling worker.
    const generating = await startTestServer({ dataDir });
    user = await generating.user();
    const sub = await submit(generating, user.secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a lighthouse', parameters: { outputCount: 2, resolution: '512' } });
    assert.equal(sub.status, 202);
    const task = await waitForTask(generating, user.secret, sub.body.task.id);
    assert.equal(task.outputs.filter((o) => o.asset).length, 2);
    taskId = task.id;
    await generating.close();
    s = await startTestServer({ dataDir, env: { WORKER_ENABLED: 'false' } });
    onStatement(s.db, (sql) => statements.push(sql));
  });
  after(async () => {
    await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await dropDatabaseFor(dataDir);
  });

  /** The statements the server ran while answering one request. */
  async function count(method: string, path: string, key?: string): Promise<{ status: number; statements: string[] }> {
    statements = [];
    const res = await s.call(method, path, { ...(key && { key }) });
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 50)); // sqlite3 reports a statement's trace asynchronously
    return { status: res.status, statements };
  }

  it('when a task with two generated outputs is read, then it takes one statement, plus one for a key not read in the last moment', async () => {
    await new Promise((r) => setTimeout(r, PRINCIPAL_TTL_MS + 50)); // any cache entry of the key is stale now
    const cold = await count('GET', `/api/generate/tasks/${taskId}`, user.secret);
    assert.equal(cold.status, 200);
    assert.equal(cold.statements.length, 2, cold.statements.join('\n'));
    const warm = await count('GET', `/api/generate/tasks/${taskId}`, user.secret);
    assert.equal(warm.statements.length, 1, warm.statements.join('\n'));
    const head = await count('HEAD', `/api/generate/tasks/${taskId}`, user.secret);
    assert.equal(head.status, 200);
    assert.equal(head.statements.length, 1, head.statements.join('\n'));
  });

  it('when models are listed with a cached key or without a key, then no statement runs', async () => {
    const user = await s.user();
    assert.equal((await count('GET', '/api/generate/models', user.secret)).statements.length, 1, 'the first use reads the key');
    const listed = await count('GET', '/api/generate/models', user.secret);
    assert.equal(listed.status, 200);
    assert.equal(listed.statements.length, 0);
    const missing = await count('GET', '/api/generate/models');
    assert.equal(missing.status, 401);
    assert.equal(missing.statements.length, 0);
  });
});
