/**
 * Type-level tests of the client (as openapi-fetch's types.test.ts), so a bad call fails to compile:
 * every `// @ts-expect-error` line is a call that breaks the contract and must
 * fail to compile. `npm run typecheck` checks them (tsconfig includes test/);
 * an unused directive is itself a compile error, so a loosened type is caught.
 * Nothing here runs: the calls sit in a function that is never called, and the
 * file's name keeps it out of the node:test glob.
 */
import { createGemforgeClient, type GemforgeClient } from '../../client/client.ts';
import { uploadVoice } from '../../client/uploads.ts';

export function clientTypeTests(gf: GemforgeClient): void {
  // --- valid calls compile ---
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { outputCount: 2, ratio: '16:9', background: 'transparent' }, maxGems: 40 });
  void gf.videos.create({ model: 'gemforge-video-1', prompt: 'waves', parameters: { mode: 'image-to-video', sourceImage: 'ast_1', duration: 4, audio: true } });
  void gf.audio.create({ model: 'gemforge-speech-1', operation: 'speech', prompt: 'hello', parameters: { voiceProfileId: 'voice_1', speed: 1.1 } });
  void gf.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }, { idempotencyKey: 'k-1' });
  void gf.chat.completions.stream({
    model: 'gemforge-text-1',
    messages: [
      { role: 'system', content: 's' },
      { role: 'user', content: 'hi' },
    ],
  });
  void gf.extract.video({ model: 'gemforge-video-analysis-1', videoAssetId: 'ast_v', prompt: 'scenes' });
  void gf.voices.list({ scope: 'explore', page: 2, language: 'en' });
  void gf.raw.GET('/api/generate/tasks/{id}', { params: { path: { id: 'task_1' } } });

  // --- a wrong field name ---
  // @ts-expect-error `promt` is not a field of ImageRequest
  void gf.images.create({ model: 'gemforge-image-1', promt: 'a fox' });
  // @ts-expect-error `outputs` is not an image parameter (outputCount is)
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { outputs: 2 } });
  // @ts-expect-error `referenceIds` is not a field (referenceAssetIds is)
  void gf.videos.create({ model: 'gemforge-video-1', prompt: 'x', referenceIds: ['a'] });
  // @ts-expect-error `maxTokens` is not a chat field (max_tokens is)
  void gf.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi' }], maxTokens: 5 });

  // --- a missing required field ---
  // @ts-expect-error `prompt` is required
  void gf.images.create({ model: 'gemforge-image-1' });
  // @ts-expect-error `operation` is required for audio
  void gf.audio.create({ model: 'gemforge-music-1', prompt: 'a song' });
  // @ts-expect-error `messages` is required
  void gf.chat.completions.create({ model: 'gemforge-text-1' });
  // @ts-expect-error `videoAssetId` is required
  void gf.extract.video({ model: 'gemforge-video-analysis-1' });

  // --- a wrong enum (or const) value ---
  // @ts-expect-error background is auto | transparent | opaque
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { background: 'clear' } });
  // @ts-expect-error mode is text-to-video | image-to-video
  void gf.videos.create({ model: 'gemforge-video-1', prompt: 'x', parameters: { mode: 'video-to-video' } });
  // @ts-expect-error operation is speech | music | voice_clone
  void gf.audio.create({ model: 'gemforge-speech-1', operation: 'sing', prompt: 'x' });
  // @ts-expect-error role is system | user | assistant (no tools)
  void gf.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'tool', content: 'x' }] });
  // @ts-expect-error the analysis model is the constant gemforge-video-analysis-1
  void gf.extract.video({ model: 'gemforge-video-1', videoAssetId: 'ast_v' });
  // @ts-expect-error scope is mine | explore
  void gf.voices.list({ scope: 'public' });

  // --- a wrong type ---
  // @ts-expect-error outputCount is an integer, not a string
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', parameters: { outputCount: '2' } });
  // @ts-expect-error maxGems is a number
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', maxGems: '40' });
  // @ts-expect-error referenceAssetIds is a string array
  void gf.images.create({ model: 'gemforge-image-1', prompt: 'a fox', referenceAssetIds: 'ast_1' });
  // @ts-expect-error array-valued (multimodal) content is not part of the contract
  void gf.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] });
  // @ts-expect-error create() is the JSON form; streaming goes through stream()
  void gf.chat.completions.create({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi' }], stream: true });
  // @ts-expect-error a voice upload needs rightsConfirmed: true, stated explicitly
  void gf.voices.create({ file: new Blob([]), duration: 20, rightsConfirmed: false });
  // @ts-expect-error rightsConfirmed is required for the Node helper too
  void uploadVoice(gf, '/tmp/v.wav', { duration: 20 });

  // --- the raw openapi-fetch client is typed from `paths` too ---
  // @ts-expect-error not a path of the contract
  void gf.raw.GET('/api/generate/model', {});
  // @ts-expect-error a spending call without the required Idempotency-Key header
  void gf.raw.POST('/api/generate/image', { body: { model: 'gemforge-image-1', prompt: 'x' } });
  // @ts-expect-error there is no DELETE on tasks (no cancellation endpoint)
  void gf.raw.DELETE('/api/generate/tasks/{id}', { params: { path: { id: 't' } } });
  // @ts-expect-error the task path needs its id
  void gf.raw.GET('/api/generate/tasks/{id}', { params: { path: {} } });

  // --- responses are typed ---
  void gf.tasks.get('t').then((task) => {
    const status: 'queued' | 'processing' | 'succeeded' | 'partial' | 'failed' | 'cancelled' = task.status;
    // @ts-expect-error there is no `state` on a task (status is)
    void task.state;
    void status;
  });
}

// `createGemforgeClient` requires a base URL and a key.
// @ts-expect-error apiKey is required
export const noKey = () => createGemforgeClient({ baseUrl: 'http://127.0.0.1:8080' });
