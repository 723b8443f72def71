/**
 * The validator's route lookup compiles each documented path once
 * (server/http/validator-routes.ts), and still finds the same operations and
 * path parameters; its parameter mutator runs only where a request has a query
 * string or an operation has parameters it reshapes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { validatorsParameterMutator, validatorsPathToRegexp } from '../server/http/validator-routes.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

describe('validator route patterns', () => {
  const mod = validatorsPathToRegexp();
  const compiled: string[] = [];
  const mutated: string[] = [];
  let s: TestServer;
  let secret: string;
  before(async () => {
    // Likewise what reaches the validator's parameter mutator.
    const proto = validatorsParameterMutator().prototype;
    const modify = proto.modifyRequest;
    if (modify.fastPath) assert.fail('another test in this process installed the fast path first; run this file alone');
    proto.modifyRequest = function (this: typeof proto, req: Parameters<typeof modify>[0]) {
      mutated.push(req.originalUrl);
      return modify.call(this, req);
    };
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

  it('when a request has no query string and its operation has only plain path or header parameters, then the parameter mutator is skipped, and every other request still goes through it', async () => {
    const missing = 'task_00000000000000000000000000000000';
    mutated.length = 0;
    assert.equal((await s.call('GET', '/api/generate/models', { key: secret })).status, 200);
    assert.equal((await s.call('GET', `/api/generate/tasks/${missing}`, { key: secret })).status, 404);
    assert.deepEqual(mutated, []);
    const unknown = await s.call('GET', `/api/generate/tasks/${missing}?verbose=1`, { key: secret });
    assert.equal(unknown.status, 422, 'an unknown query parameter is still refused');
    assert.match(((await unknown.json()) as { error: { message: string } }).error.message, /Unknown query parameter 'verbose'/);
    const bad = await s.call('GET', '/api/generate/voices?page=two', { key: secret });
    assert.equal(bad.status, 422, 'a query parameter of the wrong type is still refused');
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'INVALID_REQUEST');
    assert.equal((await s.call('GET', '/api/generate/voices?page=2', { key: secret })).status, 200);
    assert.deepEqual(mutated, [`/api/generate/tasks/${missing}?verbose=1`, '/api/generate/voices?page=two', '/api/generate/voices?page=2']);
  });
});
