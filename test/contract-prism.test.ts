/**
 * Prism (Stoplight's mock server and request validator) reads the contract as
 * gemforge does: every request example, sent as written with its operation's
 * Idempotency-Key example of the same name, passes Prism's request validation.
 * test/contract-examples.test.ts proves the server accepts each of them; a
 * schema that Prism reads differently (an allOf of if/then and a `$ref` with
 * siblings once made it refuse the speech example) fails here.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createLogger } from '@stoplight/prism-core';
import { createInstance, getHttpOperationsFromSpec, type IHttpConfig } from '@stoplight/prism-http';
import { loadContract, resolveRef, type Json } from './helpers/contract-schemas.ts';

const root = path.resolve(import.meta.dirname, '..');
const contract = loadContract();
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

interface Example {
  name: string;
  method: string;
  path: string;
  mediaType: string;
  body: unknown;
  headers: Record<string, string>;
}

/** The operation's header parameters with an example: the one named like the body example, else the first. */
function headerExamples(parameters: Json[], name: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of parameters) {
    const p = resolveRef(contract, raw);
    if (p?.in !== 'header') continue;
    const named = p.examples?.[name]?.value ?? p.example ?? Object.values((p.examples ?? {}) as Record<string, Json>)[0]?.value;
    if (named !== undefined) out[p.name.toLowerCase()] = String(named);
  }
  return out;
}

/** Every request body example of the contract with what it is sent with. */
function requestExamples(): Example[] {
  const found: Example[] = [];
  for (const [route, item] of Object.entries(contract.paths as Record<string, Json>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const body = resolveRef(contract, op.requestBody);
      const parameters = [...(item.parameters ?? []), ...(op.parameters ?? [])];
      for (const [mediaType, media] of Object.entries((body?.content ?? {}) as Record<string, Json>)) {
        const examples: Array<[string, unknown]> = Object.entries((media.examples ?? {}) as Record<string, Json>).map(([n, ex]) => [n, ex.value]);
        if (media.example !== undefined) examples.push(['example', media.example]);
        for (const [name, value] of examples) {
          found.push({ name, method, path: route, mediaType, body: value, headers: headerExamples(parameters, name) });
        }
      }
    }
  }
  return found;
}

describe('the contract as Prism reads it', async () => {
  const operations = await getHttpOperationsFromSpec(path.join(root, 'openapi/openapi.yaml'));
  const config: IHttpConfig = {
    mock: { dynamic: false },
    checkSecurity: false,
    validateRequest: true,
    validateResponse: false,
    errors: false,
    upstreamProxy: undefined,
    isProxy: false,
  };
  const prism = createInstance(config, { logger: createLogger('prism', { enabled: false }) });
  const examples = requestExamples();

  it('when the request examples are collected, then every body-taking operation has some', () => {
    const operationsWithExamples = new Set(examples.map((e) => `${e.method} ${e.path}`));
    for (const op of ['post /api/generate/image', 'post /api/generate/video', 'post /api/generate/audio', 'post /api/generate/text/v1/chat/completions']) {
      assert.ok(operationsWithExamples.has(op), op);
    }
    assert.ok(examples.filter((e) => e.path === '/api/generate/audio').length >= 4, 'speech, voice clone and both music modes');
  });

  for (const ex of examples) {
    it(`when ${ex.method.toUpperCase()} ${ex.path} example ${ex.name} (${ex.mediaType}) goes through Prism, then it passes request validation`, async () => {
      const result = await prism.request(
        {
          method: ex.method as 'post',
          url: { path: ex.path },
          headers: { ...ex.headers, 'content-type': ex.mediaType, authorization: 'Bearer gf_example' },
          body: ex.body,
        },
        operations,
      )();
      assert.equal(result._tag, 'Right', JSON.stringify(result));
      if (result._tag !== 'Right') return;
      const errors = result.right.validations.input.filter((d) => d.severity === 0);
      assert.deepEqual(errors, [], JSON.stringify(errors.slice(0, 3)));
    });
  }
});
