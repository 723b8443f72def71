/**
 * The core calls through the client @hey-api/openapi-ts generates from the
 * contract (plugins @hey-api/client-fetch, @hey-api/typescript, @hey-api/sdk),
 * with the per-call options docs/client-and-cli.md lists. Compiled strictly and
 * run by test/generated-clients.test.ts against a real server; `out/hey` is
 * written there, next to a copy of this file (so the repository's own typecheck
 * leaves this directory out).
 */
import { createClient } from './out/hey/client/index.js';
import { createAsset, createAudio, createImage, downloadFile, getTask, listModels, listVoices } from './out/hey/sdk.gen.js';
import type { AudioRequest, Task } from './out/hey/types.gen.js';
import type { CoreCalls } from './core-calls.js';

export function heyApiCalls(baseUrl: string, apiKey: string): CoreCalls {
  // The bearer key through `auth`: the SDK's operations declare the bearer scheme, the client adds the header.
  const client = createClient({ baseUrl, auth: apiKey });
  return {
    async models() {
      const { data } = await listModels({ client, throwOnError: true });
      return data.models.map((m) => m.id);
    },
    async image(prompt, idempotencyKey) {
      // The Idempotency-Key header is typed as required: leaving it out does not compile.
      const { data, response } = await createImage({ client, throwOnError: true, headers: { 'Idempotency-Key': idempotencyKey }, body: { model: 'gemforge-image-1', prompt } });
      return { status: response.status, taskId: data.task.id };
    },
    async task(id) {
      const { data } = await getTask({ client, throwOnError: true, path: { id } });
      const task: Task = data.task;
      return { status: task.status, urls: task.outputs.flatMap((o) => (o.asset ? [o.asset.url] : [])) };
    },
    async download(url) {
      // The signed URL's parts as the contract declares them; no key (the operation has no security).
      const u = new URL(url);
      const { data, response } = await downloadFile({
        client,
        baseUrl: u.origin,
        throwOnError: true,
        path: { assetId: decodeURIComponent(u.pathname.split('/').pop()!) },
        query: { expires: u.searchParams.get('expires')!, sig: u.searchParams.get('sig')! },
      });
      return { contentType: response.headers.get('content-type'), bytes: new Uint8Array(await data.arrayBuffer()) };
    },
    async upload(bytes, contentType) {
      // Raw bytes: no JSON serialising of the Blob (bodySerializer: null), and the file's own
      // Content-Type (the SDK's default is the first declared type, image/png).
      const { data, response } = await createAsset({
        client,
        throwOnError: true,
        body: new Blob([bytes], { type: contentType }),
        bodySerializer: null,
        headers: { 'Content-Type': contentType, 'X-Filename': 'clip.mp4' },
      });
      return { status: response.status, id: data.asset.id, kind: data.asset.kind };
    },
    async voices() {
      const { data } = await listVoices({ client, throwOnError: true, query: { scope: 'explore' } });
      return data.voices.map((v) => v.id);
    },
    async speech(voiceProfileId, idempotencyKey) {
      const body: AudioRequest = { model: 'gemforge-speech-1', operation: 'speech', prompt: 'Hello from a generated client.', parameters: { voiceProfileId } };
      const { data, response } = await createAudio({ client, throwOnError: true, headers: { 'Idempotency-Key': idempotencyKey }, body });
      return { status: response.status, taskId: data.task.id };
    },
  };
}

// The speech and music rules are in the generated types, not lost to `unknown & …`.
// @ts-expect-error speech without parameters.voiceProfileId
export const speechWithoutVoice: AudioRequest = { model: 'gemforge-speech-1', operation: 'speech', prompt: 'x', parameters: {} };
// @ts-expect-error music does not take voiceProfileId
export const musicWithVoice: AudioRequest = { model: 'gemforge-music-1', operation: 'music', prompt: 'x', parameters: { voiceProfileId: 'voice_x' } };
// @ts-expect-error an operation outside speech, voice_clone and music
export const unknownOperation: AudioRequest = { model: 'gemforge-music-1', operation: 'sing', prompt: 'x' };
