/**
 * Inherited property names at the real server: a prompt with `constructor` (any case)
 * or another inherited property name used to make a video task fail
 * (`color=c=0x920dNaN`) and an image task succeed, charged, entirely black.
 * Every generator and route now treats those names as plain text.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, download, submit, waitForTask } from './helpers/tasks.ts';
import { PROTOTYPE_NAMES } from './helpers/prototype-names.ts';

const NAMES = ['constructor', 'Constructor', 'CONSTRUCTOR', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];
const ALL = NAMES.join(' ');
const BROOKE = 'voice_72f75e56f33b8e9d6d8f4475';

describe('inherited property names as user text', () => {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startTestServer();
    key = (await s.user({ gems: 10_000, llmAllowance: 10_000 })).secret;
  });
  after(() => s.close());

  for (const name of NAMES) {
    it(`when an image prompt is "${name}", then the PNG is a real, not-black picture`, async () => {
      const sub = await submit(s, key, '/api/generate/image', { model: 'gemforge-image-1', prompt: name, parameters: { resolution: '512' } });
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      const task = await waitForTask(s, key, sub.body.task.id);
      assert.equal(task.status, 'succeeded');
      assertSettled(task);
      const file = await download(task.outputs[0]!.asset!.url);
      const stats = await sharp(file.bytes).stats();
      const brightest = Math.max(...stats.channels.slice(0, 3).map((c) => c.max));
      assert.ok(brightest > 32, `the picture is not black (brightest channel ${brightest})`);
    });
  }

  it('when a video prompt holds them, then the video succeeds with real MP4 bytes', async () => {
    const sub = await submit(s, key, '/api/generate/video', { model: 'gemforge-video-lite-1', prompt: ALL, parameters: { mode: 'text-to-video' } });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const task = await waitForTask(s, key, sub.body.task.id, 120_000);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const file = await download(task.outputs[0]!.asset!.url);
    assert.equal(file.bytes.subarray(4, 8).toString('latin1'), 'ftyp');
  });

  it('when speech and music prompts, style and title hold them, then both succeed with real audio', async () => {
    const bodies = [
      { model: 'gemforge-speech-1', operation: 'speech', prompt: ALL, parameters: { voiceProfileId: BROOKE } },
      {
        model: 'gemforge-music-1',
        operation: 'music',
        prompt: ALL,
        parameters: { musicMode: 'advanced', style: ALL, title: 'constructor', negativeTags: 'valueOf', duration: '30' },
      },
    ];
    for (const body of bodies) {
      const sub = await submit(s, key, '/api/generate/audio', body);
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      const task = await waitForTask(s, key, sub.body.task.id, 120_000);
      assert.equal(task.status, 'succeeded', `${body.operation}: ${JSON.stringify(task.error)}`);
      const file = await download(task.outputs[0]!.asset!.url);
      assert.ok(file.bytes.length > 1000, `${body.operation}: real audio bytes`);
    }
  });

  it('when a chat message holds them, then the text answer completes', async () => {
    const res = await s.call('POST', '/api/generate/text/v1/chat/completions', {
      key,
      headers: { 'idempotency-key': 'proto-text-1' },
      body: { model: 'gemforge-text-1', messages: [{ role: 'user', content: ALL }] },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    assert.ok(body.choices[0]!.message.content.length > 0);
  });

  for (const name of PROTOTYPE_NAMES) {
    it(`when "${name}" is a model, an ID, a language, a content type or an asset name, then every route answers 4xx or its normal 200`, async () => {
      const seg = encodeURIComponent(name);
      const checks: Array<[string, Response, number[]]> = [
        ['task', await s.call('GET', `/api/generate/tasks/${seg}`, { key }), [404]],
        ['voices', await s.call('GET', `/api/generate/voices?language=${seg}`, { key }), [200, 422]],
        ['docs asset', await fetch(`${s.url}/docs/assets/${seg}`), [404]],
        ['file', await fetch(`${s.url}/files/${seg}`), [403, 404]],
        [
          'image model',
          await s.call('POST', '/api/generate/image', { key, headers: { 'idempotency-key': `pm-${name}-i` }, body: { model: name, prompt: 'x' } }),
          [422],
        ],
        [
          'text model',
          await s.call('POST', '/api/generate/text/v1/chat/completions', {
            key,
            headers: { 'idempotency-key': `pm-${name}-t` },
            body: { model: name, messages: [{ role: 'user', content: 'x' }] },
          }),
          [422],
        ],
        ['asset type', await s.call('POST', '/api/generate/assets', { key, headers: { 'content-type': name }, body: 'abc' }), [422]],
      ];
      for (const [what, res, allowed] of checks) {
        assert.ok(allowed.includes(res.status), `${what}: ${res.status}`);
        if (res.status >= 400) {
          const err = await errorOf(res);
          assert.deepEqual(err.keys, ['error'], what);
        } else {
          await res.arrayBuffer();
        }
      }
    });
  }
});
