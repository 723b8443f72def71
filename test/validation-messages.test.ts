/**
 * Errors that name the problem:
 * an unknown field is answered with its name and the fields the operation (or the
 * object it is in) accepts, across every operation, still 422 INVALID_REQUEST in
 * the envelope; a missing or malformed Idempotency-Key says what it must be.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { newKey } from './helpers/tasks.ts';

const VOICE = 'voice_72f75e56f33b8e9d6d8f4475';

describe('validation messages that name the problem', () => {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startTestServer();
    key = (await s.user()).secret;
  });
  after(() => s.close());

  async function refused(method: string, path: string, body: unknown, headers: Record<string, string> = { 'idempotency-key': newKey() }): Promise<string> {
    const e = await errorOf(await s.call(method, path, { key, body, headers }));
    assert.equal(e.status, 422, e.message);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.deepEqual(e.keys, ['error']);
    return e.message;
  }

  const unknownTopLevel: Array<[string, string, Record<string, unknown>, string]> = [
    [
      'text',
      '/api/generate/text/v1/chat/completions',
      { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } },
      'model, messages, stream, max_tokens, temperature, top_p, response_format, maxGems',
    ],
    ['image', '/api/generate/image', { model: 'gemforge-image-1', prompt: 'x', stream_options: 1 }, 'model, prompt, parameters, referenceAssetIds, maxGems'],
    [
      'video',
      '/api/generate/video',
      { model: 'gemforge-video-1', prompt: 'x', parameters: { mode: 'text-to-video' }, stream_options: 1 },
      'model, prompt, parameters, referenceAssetIds, maxGems',
    ],
    [
      'audio',
      '/api/generate/audio',
      { model: 'gemforge-music-1', operation: 'music', prompt: 'x', stream_options: 1 },
      'model, prompt, operation, parameters, referenceAssetIds, maxGems',
    ],
    [
      'extraction',
      '/api/generate/extract/video',
      { model: 'gemforge-video-analysis-1', videoAssetId: 'asset_x', stream_options: 1 },
      'model, videoAssetId, prompt, maxGems',
    ],
  ];
  for (const [name, path, body, accepted] of unknownTopLevel) {
    it(`when the ${name} operation gets an unknown top-level field, then 422 names it and lists the fields the operation accepts`, async () => {
      const message = await refused('POST', path, body);
      assert.equal(message, `Invalid request: unknown field \`stream_options\`; this operation accepts ${accepted}.`);
    });
  }

  it('when an unknown field is nested, then the message says where and what that object accepts', async () => {
    const message = await refused('POST', '/api/generate/text/v1/chat/completions', {
      model: 'gemforge-text-1',
      messages: [{ role: 'user', content: 'hi', name: 'x' }],
    });
    assert.equal(message, 'Invalid request: unknown field `name` in `messages[0]`, which accepts role, content.');
  });

  it('when a parameter is unknown, then the accepted parameters are those of the request it is in (speech, not music)', async () => {
    const speech = await refused('POST', '/api/generate/audio', {
      model: 'gemforge-speech-1',
      operation: 'speech',
      prompt: 'x',
      parameters: { voiceProfileId: VOICE, pitch: 2 },
    });
    assert.match(speech, /unknown parameter `pitch`; `parameters` accepts voiceProfileId, speed, volume, temperature/);
    assert.doesNotMatch(speech, /musicMode/);
    const music = await refused('POST', '/api/generate/audio', { model: 'gemforge-music-1', operation: 'music', prompt: 'x', parameters: { pitch: 2 } });
    assert.match(music, /unknown parameter `pitch`; `parameters` accepts .*musicMode/);
    assert.doesNotMatch(music, /voiceProfileId/);
  });

  it('when the audio operation is missing or unknown, or a rule of one body is broken, then 422 names the field as for any other body', async () => {
    // The audio body is a oneOf told apart by `operation`: its messages read as those of a plain object.
    const speech = { model: 'gemforge-speech-1', prompt: 'x', parameters: { voiceProfileId: VOICE } };
    const audio = (body: unknown) => refused('POST', '/api/generate/audio', body);
    assert.equal(await audio(speech), "Invalid request: body.operation must have required property 'operation'.");
    assert.match(
      await audio({ ...speech, operation: 'sing' }),
      /^Invalid request: body\.operation must be equal to one of the allowed values: (?=.*speech)(?=.*voice_clone)(?=.*music)[a-z_, ]+\.$/,
    );
    assert.equal(await audio([speech]), 'Invalid request: body must be object.');
    assert.equal(
      await audio({ ...speech, operation: 'speech', prompt: 'x'.repeat(2001) }),
      'Invalid request: body.prompt must NOT have more than 2000 characters.',
    );
    assert.equal(
      await audio({ ...speech, operation: 'voice_clone', parameters: {} }),
      "Invalid request: body.parameters.voiceProfileId must have required property 'voiceProfileId'.",
    );
    assert.equal(
      await audio({ model: 'gemforge-music-1', operation: 'music', prompt: 'x', parameters: { style: 'jazz' } }),
      'Invalid request: body.parameters.style is not accepted by this operation or mode.',
    );
    assert.equal(
      await audio({ model: 'gemforge-music-1', operation: 'music', prompt: 'x', parameters: { speed: 1 } }),
      'Invalid request: body.parameters.speed is not accepted by this operation or mode.',
    );
    assert.equal(
      await audio({ model: 'gemforge-music-1', operation: 'music', prompt: 'x', referenceAssetIds: ['asset_a', 'asset_b'] }),
      'Invalid request: body.referenceAssetIds must NOT have more than 1 items.',
    );
  });

  it('when a voice upload has an unknown form field, then it is named with the fields the form takes', async () => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(10)], { type: 'audio/wav' }), 'a.wav');
    form.append('duration', '20');
    form.append('rightsConfirmed', 'true');
    form.append('foo', 'bar');
    const res = await fetch(new URL('/api/generate/voices', s.url), { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    const e = await errorOf(res);
    assert.equal(e.status, 422);
    assert.equal(e.message, 'Invalid request: unknown field `foo`; this operation accepts file, duration, rightsConfirmed.');
  });

  it('when a query parameter is unknown, then it is named with the ones the operation takes', async () => {
    assert.equal(
      await refused('GET', '/api/generate/voices?scope=mine&foo=1', undefined, {}),
      "Invalid request: Unknown query parameter 'foo'; this operation accepts scope, page, language, model.",
    );
    assert.equal(await refused('GET', '/api/generate/models?x=1', undefined, {}), "Invalid request: Unknown query parameter 'x'; this operation takes none.");
  });

  it('when the Idempotency-Key is missing or malformed, then the message names the header and its rule', async () => {
    const body = { model: 'gemforge-image-1', prompt: 'x' };
    assert.equal(
      await refused('POST', '/api/generate/image', body, {}),
      'Invalid request: the Idempotency-Key header is missing: one key per logical request, 1–128 characters from letters, digits, `_`, `.`, `:`, `-`.',
    );
    assert.match(
      await refused('POST', '/api/generate/image', body, { 'idempotency-key': 'a b' }),
      /the Idempotency-Key header is malformed: .* \(pattern \^\[a-zA-Z0-9_.:-\]\{1,128\}\$\)\.$/,
    );
  });
});
