/**
 * The core calls through the client orval generates from the contract (client
 * `fetch`, `headers: true` so header parameters such as the required
 * Idempotency-Key are arguments of each function, and orval-fetch.ts as its
 * mutator for the base URL and the key), with the per-call options
 * docs/client-and-cli.md lists. Compiled strictly and run by
 * test/generated-clients.test.ts against a real server.
 */
import { createAsset, createAudio, createImage, downloadFile, getTask, listModels, listVoices, type AudioRequest } from './out/orval/api.js';
import type { CoreCalls } from './core-calls.js';
import { configure } from './orval-fetch.js';

/** A 2xx answer's body, else an error naming the call and what the server said. */
function ok<R extends { status: number; data: unknown }>(call: string, res: R): Extract<R, { status: 200 | 201 | 202 }>['data'] {
  if (res.status < 200 || res.status > 299) throw new Error(`${call}: ${res.status} ${JSON.stringify(res.data)}`);
  return res.data as Extract<R, { status: 200 | 201 | 202 }>['data'];
}

export function orvalCalls(baseUrl: string, apiKey: string): CoreCalls {
  configure(baseUrl, apiKey);
  return {
    async models() {
      return ok('listModels', await listModels()).models.map((m) => m.id);
    },
    async image(prompt, idempotencyKey) {
      // With `headers: true` the Idempotency-Key is a required argument.
      const res = await createImage({ model: 'gemforge-image-1', prompt }, { 'Idempotency-Key': idempotencyKey });
      return { status: res.status, taskId: ok('createImage', res).task.id };
    },
    async task(id) {
      const task = ok('getTask', await getTask(id)).task;
      return { status: task.status, urls: task.outputs.flatMap((o) => (o.asset ? [o.asset.url] : [])) };
    },
    async download(url) {
      const u = new URL(url);
      const res = await downloadFile(decodeURIComponent(u.pathname.split('/').pop()!), { expires: u.searchParams.get('expires')!, sig: u.searchParams.get('sig')! }, { headers: {} });
      const bytes = ok('downloadFile', res) as unknown as Uint8Array;
      return { contentType: res.headers.get('content-type'), bytes };
    },
    async upload(bytes, contentType) {
      // The file's own Content-Type per call (the generated default is the first declared type, image/png).
      const res = await createAsset(new Blob([bytes], { type: contentType }), { 'X-Filename': 'clip.mp4' }, { headers: { 'Content-Type': contentType } });
      const { asset } = ok('createAsset', res);
      return { status: res.status, id: asset.id, kind: asset.kind };
    },
    async voices() {
      return ok('listVoices', await listVoices({ scope: 'explore' })).voices.map((v) => v.id);
    },
    async speech(voiceProfileId, idempotencyKey) {
      const body: AudioRequest = { model: 'gemforge-speech-1', operation: 'speech', prompt: 'Hello from a generated client.', parameters: { voiceProfileId } };
      const res = await createAudio(body, { 'Idempotency-Key': idempotencyKey });
      return { status: res.status, taskId: ok('createAudio', res).task.id };
    },
  };
}

// @ts-expect-error the Idempotency-Key is required: a submission without it does not compile
export const withoutKey = () => createImage({ model: 'gemforge-image-1', prompt: 'x' });
// @ts-expect-error speech without parameters.voiceProfileId
export const speechWithoutVoice: AudioRequest = { model: 'gemforge-speech-1', operation: 'speech', prompt: 'x', parameters: {} };
// @ts-expect-error music does not take voiceProfileId
export const musicWithVoice: AudioRequest = { model: 'gemforge-music-1', operation: 'music', prompt: 'x', parameters: { voiceProfileId: 'voice_x' } };
