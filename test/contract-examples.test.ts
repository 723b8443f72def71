/**
 * Every example of the contract is executable: each example validates against
 * the schema it illustrates, and the spending operations' examples run as
 * example-driven tools send them. Each request example sent to a real server
 * and answered as documented, media generated end to end:
 * contract-examples-server.test.ts (in `npm test`, not the fast lane).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { assertValidIn, loadContract, resolveRef, schemaValidator, sseFrames, STREAM_DATA, type Json } from './helpers/contract-schemas.ts';

const contract = loadContract();
const validatorFor = schemaValidator(contract);
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head'];

/** Every example in the contract with the schema it illustrates and where it is. */
function collectExamples(): Array<{ where: string; schema: Json; value: Json; mediaType?: string }> {
  const found: Array<{ where: string; schema: Json; value: Json; mediaType?: string }> = [];
  const walk = (node: Json, where: string, key?: string) => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}[${i}]`));
    const holder = node.schema !== undefined; // a media type, parameter or header object
    const values: Array<[string, Json]> = [];
    if (node.example !== undefined) values.push(['example', node.example]);
    if (holder && node.examples && typeof node.examples === 'object') {
      for (const [name, ex] of Object.entries(node.examples as Record<string, Json>)) values.push([`examples.${name}`, ex.value]);
    }
    for (const [label, value] of values) {
      const schema = holder ? node.schema : Object.fromEntries(Object.entries(node).filter(([k]) => k !== 'example'));
      found.push({ where: `${where}.${label}`, schema, value, mediaType: key });
    }
    for (const [k, v] of Object.entries(node)) if (k !== 'example' && k !== 'examples') walk(v, `${where}.${k}`, k);
  };
  walk(contract.paths, 'paths');
  walk(contract.components, 'components');
  return found;
}

const assertValid = assertValidIn(validatorFor);

describe('contract examples', () => {
  for (const ex of collectExamples()) {
    it(`when ${ex.where} is checked, then it validates against its schema`, () => {
      if (ex.mediaType === 'text/event-stream') {
        const { frames, done } = sseFrames(ex.value);
        assert.ok(frames.length > 0 && done, `${ex.where}: data frames ending in [DONE]`);
        for (const f of frames) assertValid(STREAM_DATA, f, ex.where);
        return;
      }
      assertValid(ex.schema, ex.value, ex.where);
    });
  }

  it('when an operation requires a key scope, then the bearer scheme declares it in x-scopes, with the key shape in bearerFormat', () => {
    const scheme = contract.components.securitySchemes.bearerAuth;
    assert.match(scheme.bearerFormat, /gf_/);
    const declared = Object.keys(scheme['x-scopes']);
    const used = Object.values(contract.paths as Record<string, Json>).flatMap((item) =>
      METHODS.flatMap((m) => (item[m]?.security ?? []).flatMap((r: Json) => r.bearerAuth ?? [])),
    );
    assert.equal(used.length >= 11, true, 'every operation states its scope');
    for (const scope of used) assert.ok(declared.includes(scope), `scope ${scope} is declared`);
  });

  it('when the Model example is read, then its capabilities are those of an image model of this server', () => {
    const example = contract.components.schemas.Model.example;
    assert.equal(example.kind, 'image');
    assert.ok(Array.isArray(example.capabilities.ratios) && !('aspectRatios' in example.capabilities), 'images have ratios; aspectRatios are for video');
  });
});

/**
 * Example-driven tools (Prism, schemathesis) send the contract's examples as they
 * are: each spending operation's request examples have their
 * own Idempotency-Key examples, under the same names, and each example either
 * runs as is on a fresh server or says how to obtain the IDs it names.
 */
describe('contract examples as example-driven tools send them', () => {
  const spending: Array<{ path: string; op: Json; keys: Record<string, string>; bodies: Array<[string, Json]> }> = [];
  for (const [path, item] of Object.entries(contract.paths as Record<string, Json>)) {
    const op = item.post;
    const ref = op?.parameters?.find((p: Json) => /IdempotencyKey'?$/.test(p.$ref ?? ''))?.$ref;
    if (!ref) continue;
    const param = resolveRef(contract, { $ref: ref });
    const keys = Object.fromEntries(Object.entries(param.examples as Record<string, Json>).map(([n, e]) => [n, e.value as string]));
    const examples = op.requestBody.content['application/json'].examples as Record<string, Json>;
    spending.push({ path, op, keys, bodies: Object.entries(examples) });
  }

  it('when the spending operations are read, then all five have an Idempotency-Key example per request example, none shared', () => {
    assert.deepEqual(spending.map((s) => s.op.operationId).sort(), ['createAudio', 'createChatCompletion', 'createImage', 'createVideo', 'extractVideo']);
    const all: string[] = [];
    for (const s of spending) {
      assert.deepEqual(Object.keys(s.keys).sort(), s.bodies.map(([n]) => n).sort(), `${s.op.operationId}: one key per body example, same names`);
      all.push(...Object.values(s.keys));
    }
    assert.equal(new Set(all).size, all.length, `distinct keys: ${all.join(', ')}`);
  });

  it('when a request example names an uploaded asset or a private voice, then its description says how to obtain it; every other one says it runs as is', () => {
    for (const s of spending) {
      for (const [name, example] of s.bodies) {
        const text = JSON.stringify(example.value);
        const needsUpload = /"asset_/.test(text) || example.value.operation === 'voice_clone';
        const where = `${s.op.operationId}/${name}`;
        if (needsUpload) assert.match(example.description ?? '', /(upload|create)\s+it first with\s+`create(Asset|Voice)`/, where);
        else assert.match(example.description ?? '', /Runs as is on a fresh server/, where);
      }
    }
  });

  describe('at a fresh server', () => {
    let s: TestServer;
    let key: string;
    before(async () => {
      // No worker: only the answers to the sends are checked, not the videos and songs the accepted ones would make.
      s = await startTestServer({ env: { WORKER_ENABLED: 'false' } });
      key = (await s.user({ gems: 100_000, llmAllowance: 100_000 })).secret;
    });
    after(() => s.close());

    it('when every example is sent as written with its own key, twice, then none collides: runnable ones are accepted and replayed, placeholders answer INVALID_REFERENCE', async () => {
      for (const op of spending) {
        for (const [name, example] of op.bodies) {
          const where = `${op.op.operationId}/${name}`;
          const send = () => s.call('POST', op.path, { key, body: example.value, headers: { 'idempotency-key': op.keys[name]! } });
          const first = await send();
          const firstText = await first.text();
          if (/Runs as is/.test(example.description)) {
            assert.ok([200, 202].includes(first.status), `${where}: ${first.status} ${firstText}`);
            const again = await send();
            await again.arrayBuffer();
            assert.equal(again.status, 200, `${where}: the second send is a replay, not a conflict`);
          } else {
            assert.equal(first.status, 422, `${where}: ${firstText}`);
            assert.equal((JSON.parse(firstText) as { error: { code: string } }).error.code, 'INVALID_REFERENCE', where);
          }
        }
      }
    });
  });
});
