/**
 * The fakes are held to the providers' published API documents
 * (test/fixtures/upstream-contracts/): a request the real API would refuse is
 * answered as a bad request and fails the test that sent it (the fake's
 * close() throws), whatever our adapters expect.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeFal, startFakeOpenAiImages, startFakeOpenAiSpeech, startFakeReplicate, type FakeUpstream } from './helpers/fake-upstreams.ts';
import { requestViolation, responseViolation, schemaViolation } from './helpers/upstream-contracts.ts';
import { upstreamBody } from '../server/providers/text/upstream.ts';

/** Sends `body` to the fake and returns the status and whether close() then failed naming the document. */
async function refused(
  fake: FakeUpstream,
  method: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; closeError: string }> {
  const res = await fetch(`${fake.url}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  const closeError = await fake.close().then(
    () => '',
    (e: unknown) => String(e),
  );
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

  it("when the text upstream builds a chat completion for a reasoning model and for another, then OpenAI's published request schema takes both", () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'hi' },
    ];
    const request = { model: 'o3-mini', messages, max_tokens: 300, temperature: 0.3, top_p: 0.9, response_format: { type: 'json_object' as const } };
    for (const model of ['o3-mini', 'gpt-4o-mini']) {
      assert.equal(
        requestViolation('openai', 'POST', '/v1/chat/completions', JSON.parse(JSON.stringify(upstreamBody({ ...request, model })))),
        undefined,
        model,
      );
    }
    assert.match(
      requestViolation('openai', 'POST', '/v1/chat/completions', { model: 'o3-mini', messages: [], max_completion_tokens: 'many' }) ?? '',
      /messages must NOT have fewer than 1 items.*max_completion_tokens must be integer/,
    );
  });

  it('when chat completion answers are read, then a streamed chunk and its usage (with reasoning_tokens) are held to the documented shapes', () => {
    const usage = { prompt_tokens: 11, completion_tokens: 203, total_tokens: 214, completion_tokens_details: { reasoning_tokens: 200 } };
    const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'o3-mini', choices: [], usage };
    assert.equal(schemaViolation('openai', 'CreateChatCompletionStreamResponse', chunk), undefined);
    assert.match(schemaViolation('openai', 'CreateChatCompletionStreamResponse', { id: 'c', choices: [], usage }) ?? '', /required property 'created'/);
    assert.match(
      schemaViolation('openai', 'CreateChatCompletionStreamResponse', {
        ...chunk,
        usage: { ...usage, completion_tokens_details: { reasoning_tokens: 'lots' } },
      }) ?? '',
      /reasoning_tokens must be integer/,
    );
  });

  it('when the documents are read, then 3.0-style nullable fields take null and Replicate\'s "hidden" version is one version', () => {
    assert.equal(requestViolation('openai', 'POST', '/v1/images/generations', { model: 'gpt-image-1', prompt: 'x', n: null, quality: null }), undefined);
    const prediction = {
      id: 'p',
      model: 'a/b',
      version: 'hidden',
      input: {},
      output: null,
      data_removed: false,
      error: null,
      status: 'aborted',
      created_at: '2026-01-01T00:00:00Z',
      urls: { get: 'https://x/g', cancel: 'https://x/c', web: 'https://x/w' },
    };
    assert.equal(responseViolation('replicate', 'GET', '/v1/predictions/p', 200, prediction), undefined);
    assert.match(responseViolation('replicate', 'GET', '/v1/predictions/p', 200, { ...prediction, status: 'done' }) ?? '', /status/);
  });
});
