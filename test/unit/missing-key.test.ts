/**
 * The 401 short cut before the validator (server/http/missing-key.ts): its route
 * match is the validator's (path-to-regexp, as express-openapi-validator calls
 * it), and it answers only where the validator would answer 401.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToRegexp } from 'path-to-regexp';
import YAML from 'yaml';
import type { NextFunction, Request, Response } from 'express';
import { bearerOnlyRoutes, contractPathRegExp, missingKey } from '../../server/http/missing-key.ts';
import { answerOf } from '../../server/http/error-map.ts';

const CONTRACT = path.join(import.meta.dirname, '../../openapi/openapi.yaml');

/** What the middleware passed on: undefined (the validator decides) or the error. */
function run(method: string, url: string, headers: Record<string, string> = {}): unknown {
  let passed: unknown = 'not called';
  missingKey(CONTRACT)({ method, originalUrl: url, headers } as unknown as Request, {} as Response, ((e?: unknown) => (passed = e)) as NextFunction);
  return passed;
}

describe('missing key short cut', () => {
  it('when a contract path is turned into a pattern, then it is the regexp the validator builds for it', () => {
    const contract = YAML.parse(fs.readFileSync(CONTRACT, 'utf8')) as { paths: Record<string, unknown> };
    for (const p of Object.keys(contract.paths)) {
      const express = p.replace(/\{([^}]+)\}/g, ':$1');
      assert.equal(
        contractPathRegExp(p).source,
        pathToRegexp(express, { sensitive: false }) /* the validator also passes `strict`, which path-to-regexp 8 ignores */.regexp.source,
        p,
      );
      assert.equal(contractPathRegExp(p).flags, 'i');
    }
  });

  it('when every documented operation is listed, then each API operation needs the bearer key and the signed download none', () => {
    const routes = bearerOnlyRoutes(YAML.parse(fs.readFileSync(CONTRACT, 'utf8')));
    assert.ok(routes.length > 0);
    for (const { pattern, methods } of routes) {
      // The signed URL is its own authorization (security: []): a missing key is not short-cut there.
      const open = pattern.test('/files/asset_x');
      for (const needs of methods.values()) assert.equal(needs, !open, String(pattern));
    }
  });

  it('when a documented operation comes without an Authorization header, then it is 401 INVALID_API_KEY', () => {
    for (const [method, url] of [
      ['GET', '/api/generate/models'],
      ['GET', '/API/generate/models/?x=1'],
      ['HEAD', '/api/generate/tasks/abc'],
      ['POST', '/api/generate/image'],
    ]) {
      const error = answerOf(run(method, url));
      assert.ok(error, `${method} ${url}`);
      assert.equal(error.status, 401);
      assert.equal(error.code, 'INVALID_API_KEY');
    }
  });

  it('when the route is unknown, the method undocumented, a parameter malformed or a header present, then the validator decides', () => {
    assert.equal(run('GET', '/api/generate/nothing'), undefined);
    assert.equal(run('DELETE', '/api/generate/models'), undefined);
    assert.equal(run('GET', '/api/generate/tasks/%E0%A4%A'), undefined);
    assert.equal(run('GET', '/api/generate/tasks/a/b'), undefined);
    assert.equal(run('GET', '/api/generate/models', { authorization: 'Basic x' }), undefined);
  });

  it('when the contract has a server URL with a path, or an operation open to anyone, then nothing is short-cut', () => {
    const doc = { components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } }, security: [{ bearerAuth: [] }] };
    assert.deepEqual(bearerOnlyRoutes({ ...doc, servers: [{ url: 'http://h/v1' }], paths: { '/a': { get: {} } } }), []);
    const open = bearerOnlyRoutes({ ...doc, servers: [{ url: 'http://h:1' }], paths: { '/a': { get: { security: [{}, { bearerAuth: [] }] }, post: {} } } });
    assert.equal(open[0].methods.get('get'), false);
    assert.equal(open[0].methods.get('post'), true);
  });
});
