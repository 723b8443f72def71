/**
 * The validator's route lookup compiles each documented path once
 * (server/http/validator-routes.ts), and still finds the same operations and
 * path parameters.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { validatorsPathToRegexp } from '../server/http/validator-routes.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

describe('validator route patterns', () => {
  const mod = validatorsPathToRegexp();
  const compiled: string[] = [];
  let s: TestServer;
  let secret: string;
  before(async () => {
    // Count what reaches path-to-regexp itself, under whatever the server installs.
    const original = mod.pathToRegexp;
    if (original.memoized) assert.fail('another test in this process installed the memo first; run this file alone');
    mod.pathToRegexp = (path: unknown, options?: Record<string, unknown>) => {
      compiled.push(String(path));
      return original(path, options);
    };
    s = await startTestServer();
    ({ secret } = await s.user());
  });
  after(() => s.close());

  it('when many requests reach documented paths, then each path is compiled at most once and parameters still arrive', async () => {
    const missing = 'task_00000000000000000000000000000000';
    for (let i = 0; i < 25; i++) {
      assert.equal((await s.call('GET', '/api/generate/models', { key: secret })).status, 200);
      const res = await s.call('GET', `/api/generate/tasks/${missing}`, { key: secret });
      assert.equal(res.status, 404);
      assert.match(((await res.json()) as { error: { message: string } }).error.message, new RegExp(missing), 'the path parameter reached the handler');
      assert.equal((await s.call('GET', '/api/generate/voices?page=2', { key: secret })).status, 200);
    }
    const counts = new Map<string, number>();
    for (const p of compiled) counts.set(p, (counts.get(p) ?? 0) + 1);
    assert.ok(counts.size > 0, 'the validator compiles its paths through this export');
    for (const [p, n] of counts) assert.equal(n, 1, `${p} compiled ${n} times`);
  });

  it('when the same path and options are asked for twice, then the same pattern comes back, matching as a fresh one does', () => {
    const a = mod.pathToRegexp('/api/generate/tasks/:id', { sensitive: false, strict: false });
    const b = mod.pathToRegexp('/api/generate/tasks/:id', { sensitive: false, strict: false });
    assert.equal(a, b);
    const strict = mod.pathToRegexp('/api/generate/tasks/:id', { sensitive: true, strict: true });
    assert.notEqual(strict, a);
    for (const url of ['/api/generate/tasks/task_1', '/API/generate/tasks/x', '/api/generate/tasks/x/', '/api/generate/tasks']) {
      assert.deepEqual(a.regexp.exec(url)?.slice(1), /^\/api\/generate\/tasks\/([^/]+?)\/?$/i.exec(url)?.slice(1), url);
    }
  });
});
