/**
 * The fakes are held to the providers' published API documents
 * (test/fixtures/upstream-contracts/): a request the real API would refuse is
 * answered as a bad request and fails the test that sent it (the fake's
 * close() throws), whatever our adapters expect.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeFal, startFakeOpenAiImages, startFakeOpenAiSpeech, startFakeReplicate, type FakeUpstream } from './helpers/fake-upstreams.ts';
import { requestViolation, responseViolation } from './helpers/upstream-contracts.ts';

/** Sends `body` to the fake and returns the status and whether close() then failed naming the document. */
async function refused(fake: FakeUpstream, method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; closeError: string }> {
  const res = await fetch(`${fake.url}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  const closeError = await fake.close().then(() => '', (e: unknown) => String(e));
  return { status: res.status, closeError };
}

describe('upstream contracts: the fakes refuse what the published documents refuse', () => {
  it('when an image generation asks for 11 images or an unknown quality, then the OpenAI fake answers 400 and the test fails', async () => {
    const r = await refused(await startFakeOpenAiImages({}), 'POST', '/v1/images/generations', { model: 'gpt-image-1', prompt: 'x', n: 11, quality: 'ultra' });
    assert.equal(r.status, 400);
    assert.match(r.closeError, /outside the provider's published API document[\s\S]*\/n must be <= 10/);
  });

  it('when a speech request carries a field the API does not have (volume), then the OpenAI fake answers 400 and the test fails', async () => {
    const r = await refused(await startFakeOpenAiSpeech({}), 'POST', '/v1/audio/speech', { model: 'gpt-4o-mini-tts', input: 'x', voice: 'onyx', volume: 3 });
    assert.equal(r.status, 400);
    assert.match(r.closeError, /additional properties/);
  });

  it('when a prediction is created without an input object, or with a field the API does not have, then the Replicate fake answers 400 and the test fails', async () => {
    for (const body of [{ input: 'a prompt' }, { input: {}, priority: 'high' }]) {
      const r = await refused(await startFakeReplicate({}), 'POST', '/v1/models/acme/video-gen/predictions', body);
      assert.equal(r.status, 400);
      assert.match(r.closeError, /outside the provider's published API document/);
    }
  });

  it('when a queued request is submitted with a body that is not an object, then the fal fake answers 400 and the test fails', async () => {
    const r = await refused(await startFakeFal({}), 'POST', '/fal-ai/flux/dev', ['a prompt']);
    assert.equal(r.status, 400);
    assert.match(r.closeError, /must be object/);
  });

  it('when the documents are read, then 3.0-style nullable fields take null and Replicate\'s "hidden" version is one version', () => {
    assert.equal(requestViolation('openai', 'POST', '/v1/images/generations', { model: 'gpt-image-1', prompt: 'x', n: null, quality: null }), undefined);
    const prediction = { id: 'p', model: 'a/b', version: 'hidden', input: {}, output: null, data_removed: false, error: null, status: 'aborted', created_at: '2026-01-01T00:00:00Z', urls: { get: 'https://x/g', cancel: 'https://x/c', web: 'https://x/w' } };
    assert.equal(responseViolation('replicate', 'GET', '/v1/predictions/p', 200, prediction), undefined);
    assert.match(responseViolation('replicate', 'GET', '/v1/predictions/p', 200, { ...prediction, status: 'done' }) ?? '', /status/);
  });
});
