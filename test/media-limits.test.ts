/**
 * Media is measured before it is decoded: a decompression bomb, images
 * over the pixel limits, and audio/video over the duration, resolution and stream
 * limits are refused at upload with 422 naming the limit, without decoding them;
 * assets over the limits are refused as references.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import * as media from './helpers/media.ts';
import { requireUsableAsset } from '../server/domain/assets.ts';
import * as assetStore from '../server/storage/assets.ts';
import { answerOf } from '../server/http/error-map.ts';
import { MAX_IMAGE_PIXELS, MAX_MEDIA_SECONDS, MAX_MEDIA_STREAMS } from '../server/media/limits.ts';

const ASSETS = '/api/generate/assets';
const number = (n: number) => n.toLocaleString('en-US');

describe('media limits at upload', () => {
  let s: TestServer;
  let key: string;
  let accountId: string;

  before(async () => {
    s = await startTestServer();
    ({ secret: key, accountId } = await s.user());
  });
  after(() => s.close());

  const upload = (bytes: Buffer, contentType: string) =>
    fetch(new URL(ASSETS, s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': contentType },
      body: new Uint8Array(bytes),
    });

  /** Files in the blob store (an accepted upload adds one). */
  const blobCount = () => {
    const root = path.join(s.dataDir, 'blobs');
    return fs.existsSync(root) ? fs.readdirSync(root, { recursive: true }).filter((f) => /[0-9a-f]{64}/.test(String(f))).length : 0;
  };

  it('when a PNG that declares 16000×16000 RGBA (a decompression bomb) is uploaded, then 422 names the pixel limit, memory stays flat and nothing is stored', async () => {
    const bomb = fs.readFileSync(await media.pngBomb());
    assert.ok(bomb.length < 2 * 1024 * 1024, `the bomb is small on the wire (${bomb.length} bytes)`);
    const blobsBefore = blobCount();
    const before = process.memoryUsage.rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
    try {
      // Three at once, as the audit did: decoding them would add 3 GB.
      const answers = await Promise.all([0, 1, 2].map(() => upload(bomb, 'image/png').then(errorOf)));
      for (const e of answers) {
        assert.equal(e.status, 422);
        assert.equal(e.code, 'INVALID_REQUEST');
        assert.match(e.message, /16000×16000 pixels \(256,000,000\); the limit is 40,000,000 pixels/);
      }
    } finally {
      clearInterval(sampler);
    }
    const grewMiB = (peak - before) / 1024 / 1024;
    assert.ok(grewMiB < 150, `the server's memory rose by ${grewMiB.toFixed(0)} MiB (decoding one bomb takes 1,000)`);
    assert.equal(blobCount(), blobsBefore);
  });

  it('when an image is one pixel over the side limit or the pixel limit, then 422 names the limit; at the limit it is measured, not refused for size', async () => {
    for (const [w, h] of [
      [16_385, 1],
      [8_000, 5_001],
    ]) {
      const e = await errorOf(await upload(media.pngHeaderOnly(w, h), 'image/png'));
      assert.equal(e.status, 422, `${w}×${h}`);
      assert.match(e.message, new RegExp(`${w}×${h} pixels \\(${number(w * h)}\\); the limit is ${number(MAX_IMAGE_PIXELS)} pixels and 16,384 per side`));
    }
    // 8000×5000 is allowed by size: this file only fails because its pixel data is missing.
    const e = await errorOf(await upload(media.pngHeaderOnly(8_000, 5_000), 'image/png'));
    assert.equal(e.status, 422);
    assert.match(e.message, /could not be decoded/);
  });

  it('when an interlaced 16-bit RGBA PNG would take more than 160 MiB to decode whole, then 422 names that limit', async () => {
    const e = await errorOf(await upload(media.pngHeaderOnly(5_000, 5_000, { depth: 16, interlaced: true }), 'image/png'));
    assert.equal(e.status, 422);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, /would take 191 MiB to decode; the limit for images decoded whole is 160 MiB/);
    // The same size, not interlaced, decodes a few lines at a time: no such limit (it fails only for its missing rows).
    const streamed = await errorOf(await upload(media.pngHeaderOnly(5_000, 5_000, { depth: 16 }), 'image/png'));
    assert.match(streamed.message, /could not be decoded/);
  });

  it('when a truncated image is uploaded, then the bounded decode still finds it broken', async () => {
    const whole = fs.readFileSync(await media.image('jpeg', 640, 480));
    const e = await errorOf(await upload(whole.subarray(0, Math.floor(whole.length * 0.97)), 'image/jpeg'));
    assert.equal(e.status, 422);
    assert.match(e.message, /could not be decoded/);
  });

  it('when audio is longer than the limit, then 422 names the limit', async () => {
    const rate = 1000;
    const seconds = MAX_MEDIA_SECONDS + 1;
    const e = await errorOf(await upload(media.wavOfSize(44 + 2 * rate * seconds, rate), 'audio/wav'));
    assert.equal(e.status, 422);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, new RegExp(`is ${seconds} s long; the limit is ${MAX_MEDIA_SECONDS} s`));
  });

  it('when a WAV header claims far more audio than the file holds (10 h in a 1 s file), then 422 says so; a streaming header of unknown length passes', async () => {
    const rate = 16_000;
    const lying = media.wavOfSize(44 + 2 * rate, rate);
    lying.writeUInt32LE(2 * rate * 36_000, 40); // the data chunk claims ten hours
    const e = await errorOf(await upload(lying, 'audio/wav'));
    assert.equal(e.status, 422);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, /WAV header declares 1152000000 bytes of audio, but the file holds 32000/);
    const streamed = media.wavOfSize(44 + 2 * rate, rate);
    streamed.writeUInt32LE(0xffffffff, 40); // written by a tool that did not know the length yet
    assert.equal((await upload(streamed, 'audio/wav')).status, 201);
  });

  it('when a file has more streams than the limit, then 422 names the limit', async () => {
    const e = await errorOf(await upload(fs.readFileSync(await media.manyStreams(MAX_MEDIA_STREAMS + 1)), 'audio/mp4'));
    assert.equal(e.status, 422);
    assert.match(e.message, new RegExp(`has ${MAX_MEDIA_STREAMS + 1} streams; the limit is ${MAX_MEDIA_STREAMS}`));
  });

  it('when a video frame is over the pixel limit, then 422 names the limit', async () => {
    const e = await errorOf(await upload(fs.readFileSync(await media.videoFrame(9_000, 5_000)), 'video/quicktime'));
    assert.equal(e.status, 422);
    assert.match(e.message, /The video is 9000×5000 pixels \(45,000,000\); the limit is 40,000,000 pixels/);
  });

  it('when a stored asset is over the limits (stored before they existed), then referencing it is 422 INVALID_REFERENCE naming the limit', async () => {
    const res = await upload(fs.readFileSync(await media.image('png')), 'image/png');
    assert.equal(res.status, 201);
    const { asset } = (await res.json()) as { asset: { id: string } };
    const row = (await assetStore.findAsset(s.db, asset.id))!;
    const cases: Array<[Partial<assetStore.AssetRow>, RegExp]> = [
      [{ width: 20_000, height: 20_000 }, /over the media limits: The image is 20000×20000 pixels/],
      [{ kind: 'audio', mime_type: 'audio/wav', width: null, height: null, duration_seconds: 7200 }, /it is 7200 s long; the limit is 3600 s/],
    ];
    for (const [i, [patch, pattern]] of cases.entries()) {
      const id = `asset_overlimit${String(i).padStart(15, '0')}`;
      await assetStore.insertAsset(s.db, { ...row, ...patch, id });
      await assert.rejects(requireUsableAsset(s.db, accountId, id), (e: unknown) => {
        const answer = answerOf(e);
        return answer?.status === 422 && answer.code === 'INVALID_REFERENCE' && pattern.test(answer.message);
      });
    }
    // Through the API: an image edit whose reference is the oversized image.
    const submit = await s.call('POST', '/api/generate/image', {
      key,
      headers: { 'idempotency-key': 'limits-reference-1' },
      body: { model: 'gemforge-image-1', prompt: 'a lighthouse', referenceAssetIds: ['asset_overlimit000000000000000'] },
    });
    const e = await errorOf(submit);
    assert.equal(e.status, 422);
    assert.equal(e.code, 'INVALID_REFERENCE');
    assert.match(e.message, /the limit is 40,000,000 pixels/);
  });
});
