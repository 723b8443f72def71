/**
 * Every example of the contract is executable: each example
 * validates against the schema it illustrates, and each request example, sent to
 * a real server (after uploading whatever assets and voices it references), gets
 * the documented response: the documented status, a body valid against the
 * documented schema and, for media, a task that succeeds.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { newKey, waitForTask } from './helpers/tasks.ts';
import { image, speech, video, audio } from './helpers/media.ts';
import { uploadAsset, uploadVoice } from './helpers/uploads.ts';
import { loadContract, resolveRef, schemaValidator, type Json } from './helpers/contract-schemas.ts';

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

/** The JSON of each `data:` frame of an SSE text, and whether it ended with [DONE]. */
function sseFrames(text: string): { frames: Json[]; done: boolean } {
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));
  return { frames: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d)), done: data.at(-1) === '[DONE]' };
}

function assertValid(schema: Json, value: Json, where: string): void {
  const validate = validatorFor(schema);
  assert.ok(validate(value), `${where}: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
}

/** Keys and kinds (null, string, number, …) of a JSON value, values left out. */
function shapeOf(value: Json): Json {
  if (Array.isArray(value)) return value.map(shapeOf);
  if (value === null) return null;
  if (typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shapeOf(v)]));
  return typeof value;
}

const STREAM_DATA = { $ref: '#/components/schemas/ChatCompletionStreamData' };

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

describe('contract request examples at a real server', () => {
  let s: TestServer;
  let key: string;
  let publicVoices: Set<string>;
  const uploads = new Map<string, string>();
  let uploadsFixture: string;
  before(async () => {
    uploadsFixture = await image('png', 640, 360);
    s = await startTestServer();
    key = (await s.user({ gems: 100_000, llmAllowance: 100_000 })).secret;
    const res = await s.call('GET', '/api/generate/voices?scope=explore', { key });
    publicVoices = new Set(((await res.json()) as { voices: Array<{ id: string }> }).voices.map((v) => v.id));
  });
  after(() => s.close());

  /**
   * The example with each placeholder asset replaced by a real upload of the
   * right kind, and (voice_clone only) its private voice by an uploaded one; a
   * public voice must be one this server lists.
   */
  async function materialize(value: Json, field?: string, privateVoice = value?.operation === 'voice_clone'): Promise<Json> {
    if (Array.isArray(value)) return Promise.all(value.map((v) => materialize(v, field, privateVoice)));
    if (value && typeof value === 'object') {
      const out: Json = {};
      for (const [k, v] of Object.entries(value)) out[k] = await materialize(v, k, privateVoice);
      return out;
    }
    if (typeof value !== 'string') return value;
    if (/^asset_/.test(value)) {
      const kind = field === 'coverAudio' ? 'audio' : field === 'videoAssetId' ? 'video' : 'image';
      if (!uploads.has(value)) {
        const [file, type] =
          kind === 'audio'
            ? [await audio('wav'), 'audio/wav']
            : kind === 'video'
              ? [await video('mp4'), 'video/mp4']
              : [await image('png', 640, 360), 'image/png'];
        uploads.set(value, await uploadAsset(s, key, file, type));
      }
      return uploads.get(value);
    }
    if (field === 'voiceProfileId' && privateVoice && !publicVoices.has(value)) {
      if (!uploads.has(value)) uploads.set(value, await uploadVoice(s, key, await speech(20), 20));
      return uploads.get(value);
    }
    return value;
  }

  it('when an asset is uploaded, then the answer has the shape of the createAsset example (url null, as the server answers)', async () => {
    const res = await fetch(new URL('/api/generate/assets', s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'image/png', 'x-filename': 'lighthouse.png' },
      body: new Uint8Array(fs.readFileSync(uploadsFixture)),
    });
    assert.equal(res.status, 201);
    const example = contract.paths['/api/generate/assets'].post.responses['201'].content['application/json'].example;
    assert.deepEqual(shapeOf(await res.json()), shapeOf(example));
  });

  for (const [path, item] of Object.entries(contract.paths as Record<string, Json>)) {
    for (const method of METHODS) {
      const op = item[method];
      const media = op?.requestBody?.content?.['application/json'];
      if (!media) continue;
      const examples: Array<[string, Json]> = media.examples
        ? Object.entries(media.examples).map(([n, e]: [string, Json]) => [n, e.value])
        : media.example
          ? [['example', media.example]]
          : [];
      for (const [name, example] of examples) {
        it(`when the ${op.operationId} example "${name}" is sent, then it gets the documented response`, async () => {
          const body = await materialize(example);
          const res = await s.call(method.toUpperCase(), path, { key, body, headers: { 'idempotency-key': newKey(`ex-${name}`) } });
          const documented = Object.keys(op.responses).filter((st) => /^2/.test(st));
          const status = body.stream ? '200' : documented.includes('202') ? '202' : documented[0]!;
          assert.equal(String(res.status), status, `${op.operationId}/${name}: ${await res.clone().text()}`);
          const response = resolveRef(contract, op.responses[status]);
          if (body.stream) {
            const { frames, done } = sseFrames(await res.text());
            assert.ok(done, 'the stream ends with [DONE]');
            for (const f of frames) assertValid(STREAM_DATA, f, `${op.operationId}/${name} frame`);
            return;
          }
          const json = await res.json();
          assertValid(response.content['application/json'].schema, json, `${op.operationId}/${name} response`);
          if (status === '202') {
            const task = await waitForTask(s, key, (json as { task: { id: string } }).task.id, 120_000);
            assert.equal(task.status, 'succeeded', `${op.operationId}/${name}: ${JSON.stringify(task.error)}`);
          }
        });
      }
    }
  }
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
      s = await startTestServer();
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
