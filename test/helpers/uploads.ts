/** Uploading fixtures to a test server: reference assets (raw bytes) and private voices (multipart). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { TestServer } from './server.ts';

/** Uploads `file` (a path, or the bytes themselves) as a reference asset of `type`; returns its ID. */
export async function uploadAsset(s: TestServer, key: string, file: string | Buffer, type: string): Promise<string> {
  const res = await fetch(new URL('/api/generate/assets', s.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': type },
    body: new Uint8Array(typeof file === 'string' ? fs.readFileSync(file) : file),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { asset: { id: string } }).asset.id;
}

/** Uploads a WAV recording of `seconds` as a private voice; returns its ID. */
export async function uploadVoice(s: TestServer, key: string, file: string, seconds: number): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([fs.readFileSync(file)], { type: 'audio/wav' }), path.basename(file));
  form.append('duration', String(seconds));
  form.append('rightsConfirmed', 'true');
  const res = await fetch(new URL('/api/generate/voices', s.url), { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { voice: { id: string } }).voice.id;
}
