/**
 * Every request example of the contract, sent to a real server (after
 * uploading whatever assets and voices it references), gets the documented
 * response: the documented status, a body valid against the documented schema
 * and, for media, a task that succeeds. Each media example is generated end to
 * end (images, videos, songs, speech), so this runs in `npm test`, not in the
 * fast lane; the examples' own checks against their schemas are
 * contract-examples.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { newKey, waitForTask } from './helpers/tasks.ts';
import { image, speech, video, audio } from './helpers/media.ts';
import { uploadAsset, uploadVoice } from './helpers/uploads.ts';
import { assertValidIn, loadContract, resolveRef, schemaValidator, shapeOf, sseFrames, STREAM_DATA, type Json } from './helpers/contract-schemas.ts';

const contract = loadContract();
const assertValid = assertValidIn(schemaValidator(contract));
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head'];

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
