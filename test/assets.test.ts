/**
 * POST /api/generate/assets at the real server: raw uploads of every supported
 * type, content checks, the 30 MiB boundary, X-Filename, probing, ownership.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { rawRequest } from './helpers/raw-http.ts';
import * as media from './helpers/media.ts';
import { createOutputAsset, requireUsableAsset, MAX_ASSET_BYTES } from '../server/domain/assets.ts';
import * as assetStore from '../server/storage/assets.ts';
import { blobPath, localBlobs } from '../server/storage/blobs.ts';
import { systemClock } from '../server/domain/clock.ts';
import { answerOf } from '../server/http/error-map.ts';

const ASSETS = '/api/generate/assets';

describe('assets', () => {
  let s: TestServer;
  let key: string;
  let accountId: string;

  before(async () => {
    s = await startTestServer();
    ({ secret: key, accountId } = await s.user());
  });
  after(() => s.close());

  async function upload(body: Buffer | string, contentType: string | undefined, headers: Record<string, string> = {}, k = key) {
    const bytes = typeof body === 'string' ? fs.readFileSync(body) : body;
    const h: Record<string, string> = { authorization: `Bearer ${k}`, ...headers };
    if (contentType !== undefined) h['content-type'] = contentType;
    return fetch(new URL(ASSETS, s.url), { method: 'POST', headers: h, body: bytes as Uint8Array<ArrayBuffer> });
  }

  async function created(res: Response): Promise<assetStore.AssetRow> {
    const text = await res.text();
    assert.equal(res.status, 201, text);
    const body = JSON.parse(text) as { asset: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.asset).sort(), ['id', 'kind', 'state', 'url']);
    assert.equal(body.asset.state, 'ready');
    assert.equal(body.asset.url, null);
    assert.match(body.asset.id as string, /^asset_[0-9a-f]{24}$/);
    const row = await assetStore.findAsset(s.db, body.asset.id as string);
    assert.ok(row);
    assert.equal(row.kind, body.asset.kind);
    return row;
  }

  async function rejected(res: Response, status: number, pattern?: RegExp): Promise<string> {
    const e = await errorOf(res);
    assert.equal(e.status, status, e.message);
    assert.equal(e.code, 'INVALID_REQUEST');
    if (pattern) assert.match(e.message, pattern);
    return e.message;
  }

  for (const format of ['png', 'jpeg', 'webp', 'gif'] as const) {
    it(`when a ${format} image is uploaded as image/${format}, then it is a ready image asset with its dimensions`, async () => {
      const row = await created(await upload(await media.image(format, 64, 48), `image/${format}`));
      assert.equal(row.kind, 'image');
      assert.equal(row.mime_type, `image/${format}`);
      assert.equal(row.width, 64);
      assert.equal(row.height, 48);
      assert.equal(row.origin, 'upload');
      assert.equal(row.account_id, accountId);
    });
  }

  for (const [format, mime, codec] of [
    ['mp4', 'video/mp4', 'h264'],
    ['webm', 'video/webm', 'vp8'],
    ['mov', 'video/quicktime', 'h264'],
  ] as const) {
    it(`when a ${format} video is uploaded as ${mime}, then duration, codecs and dimensions are probed and stored`, async () => {
      const row = await created(await upload(await media.video(format), mime));
      assert.equal(row.kind, 'video');
      assert.equal(row.mime_type, mime);
      assert.equal(row.width, 160);
      assert.equal(row.height, 120);
      assert.equal(row.video_codec, codec);
      assert.equal(row.has_audio, true);
      assert.ok(row.audio_codec === 'aac' || row.audio_codec === 'opus', String(row.audio_codec));
      assert.ok(row.duration_seconds! > 0.8 && row.duration_seconds! < 1.3, String(row.duration_seconds));
    });
  }

  const audios = [
    ['mp3', 'audio/mpeg', 'mp3'],
    ['wav', 'audio/wav', 'pcm_s16le'],
    ['ogg', 'audio/ogg', 'vorbis'],
    ['m4a', 'audio/mp4', 'aac'],
    ['aac', 'audio/aac', 'aac'],
    ['flac', 'audio/flac', 'flac'],
    ['webm', 'audio/webm', 'opus'],
  ] as const;
  for (const [format, mime, codec] of audios) {
    it(`when ${format} audio is uploaded as ${mime}, then it is a ready audio asset with duration and codec`, async () => {
      const row = await created(await upload(await media.audio(format), mime));
      assert.equal(row.kind, 'audio');
      assert.equal(row.mime_type, mime);
      assert.equal(row.audio_codec, codec);
      assert.equal(row.video_codec, null);
      assert.ok(row.duration_seconds! > 1.8 && row.duration_seconds! < 2.3, String(row.duration_seconds));
    });
  }

  it('when an alias such as audio/x-wav or a parameter is used, then the canonical type is stored', async () => {
    const wav = await media.audio('wav');
    assert.equal((await created(await upload(wav, 'audio/x-wav'))).mime_type, 'audio/wav');
    assert.equal((await created(await upload(wav, 'audio/wave'))).mime_type, 'audio/wav');
    assert.equal((await created(await upload(await media.image('png'), 'image/png; charset=binary'))).mime_type, 'image/png');
  });

  it('when the bytes do not match the declared type, then 422 INVALID_REQUEST says what they are', async () => {
    await rejected(await upload(await media.image('png'), 'video/mp4'), 422, /PNG image.*video\/mp4/);
    await rejected(await upload(await media.image('jpeg'), 'image/png'), 422, /JPEG image.*image\/png/);
    await rejected(await upload(await media.audio('mp3'), 'audio/wav'), 422, /MP3 audio.*audio\/wav/);
    await rejected(await upload(await media.audio('flac'), 'audio/ogg'), 422, /FLAC.*audio\/ogg/);
    await rejected(await upload(await media.image('webp'), 'audio/wav'), 422, /WebP/);
  });

  it('when a video is declared as audio (or audio as video), then 422 names the stream problem', async () => {
    await rejected(await upload(await media.video('mp4'), 'audio/mp4'), 422, /video stream/);
    await rejected(await upload(await media.video('webm'), 'audio/webm'), 422, /video stream/);
    await rejected(await upload(await media.audio('m4a'), 'video/mp4'), 422, /no video stream/);
    await rejected(await upload(await media.audio('webm'), 'video/webm'), 422, /no video stream/);
  });

  it('when the body is empty, garbage or truncated, then 422 INVALID_REQUEST', async () => {
    await rejected(await upload(Buffer.alloc(0), 'image/png'), 422, /empty/);
    await rejected(await upload(Buffer.from('this is not an image at all, just text'), 'image/png'), 422, /not a supported media file/);
    const png = fs.readFileSync(await media.image('png'));
    await rejected(await upload(png.subarray(0, 60), 'image/png'), 422, /could not be decoded/);
    const mp4 = fs.readFileSync(await media.video('mp4'));
    await rejected(await upload(mp4.subarray(0, 64), 'video/mp4'), 422, /could not be decoded|no video stream/);
  });

  it('when the Content-Type is unsupported or missing, then 422 INVALID_REQUEST', async () => {
    const png = await media.image('png');
    await rejected(await upload(png, 'application/octet-stream'), 422);
    await rejected(await upload(png, 'image/bmp'), 422, /Unsupported Content-Type/);
    await rejected(await upload(png, 'text/plain'), 422);
    await rejected(await upload(png, undefined), 422);
  });

  it('when the body is exactly 30 MiB, then it is accepted', async () => {
    const row = await created(await upload(media.wavOfSize(MAX_ASSET_BYTES), 'audio/wav'));
    assert.equal(row.size_bytes, 31_457_280);
    assert.equal(fs.statSync(blobPath(s.dataDir, row.blob_sha256)).size, 31_457_280);
  });

  it('when the body is 30 MiB + 1 byte, then 413 in the envelope', async () => {
    await rejected(await upload(media.wavOfSize(MAX_ASSET_BYTES + 1), 'audio/wav'), 413, /31457280/);
  });

  it('when an oversized body is streamed without Content-Length, then 413 arrives while streaming and nothing is stored', async () => {
    fs.mkdirSync(`${s.dataDir}/tmp`, { recursive: true });
    const before = fs.readdirSync(`${s.dataDir}/tmp`).filter((f) => f !== 'multipart');
    const total = MAX_ASSET_BYTES + 64 * 1024 * 1024; // more than socket buffers can absorb
    const chunk = Buffer.alloc(1024 * 1024);
    const result = await new Promise<{ status: number; body: string; sent: number }>((resolve, reject) => {
      const req = http.request(new URL(ASSETS, s.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'audio/wav', 'transfer-encoding': 'chunked' },
      });
      let sent = 0;
      req.on('response', (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, body, sent }));
      });
      req.on('error', (e) => (sent >= MAX_ASSET_BYTES ? undefined : reject(e)));
      const header = media.wavOfSize(44 + 1024);
      req.write(header);
      const pump = () => {
        while (sent < total) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    assert.equal(result.status, 413);
    assert.equal((JSON.parse(result.body) as { error: { code: string } }).error.code, 'INVALID_REQUEST');
    assert.ok(result.sent < total, 'the server answered before the client finished sending');
    assert.deepEqual(
      fs.readdirSync(`${s.dataDir}/tmp`).filter((f) => f !== 'multipart'),
      before,
      'the partial temp file is removed',
    );
    // The server is still healthy.
    assert.equal((await upload(await media.image('png'), 'image/png')).status, 201);
  });

  it('when X-Filename is longer than 255 characters, then it is stored truncated to 255 (metadata only)', async () => {
    const long = `${'a'.repeat(250)}bcdefghij.png`;
    const row = await created(await upload(await media.image('png'), 'image/png', { 'x-filename': long }));
    assert.equal(row.filename, long.slice(0, 255));
    const exact = await created(await upload(await media.image('png'), 'image/png', { 'x-filename': '../../etc/passwd' }));
    assert.equal(exact.filename, '../../etc/passwd', 'stored as given, never used as a path');
    assert.ok(!fs.existsSync(`${s.dataDir}/etc`));
    const none = await created(await upload(await media.image('png'), 'image/png'));
    assert.equal(none.filename, null);
  });

  it("when X-Filename is over the contract's maxLength (16,384), then it never reaches the API (413, as every header block over 16 KiB); just under it, it is taken and truncated", async () => {
    // The contract's bound writes down what the HTTP server always did (x-limits-enforced-since: 1.0.0).
    const over = await rawRequest(s.url, [
      `POST ${ASSETS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: image/png\r\nX-Filename: ${'a'.repeat(16_385)}\r\nContent-Length: 1\r\n\r\nx`,
    ]);
    assert.equal(over?.status, 413, over?.body);
    assert.equal(JSON.parse(over.body).error.code, 'INVALID_REQUEST');
    const under = await created(await upload(await media.image('png'), 'image/png', { 'x-filename': 'b'.repeat(16_000) }));
    assert.equal(under.filename, 'b'.repeat(255));
  });

  it('when X-Filename carries UTF-8 (as fetch sends it), then the name is stored as written, bidirectional controls dropped; bytes that are not UTF-8 are read as ISO-8859-1', async () => {
    const { port } = new URL(s.url);
    const png = fs.readFileSync(await media.image('png'));
    const send = (nameBytes: Buffer) =>
      new Promise<string>((resolve, reject) => {
        const head = Buffer.concat([
          Buffer.from(
            `POST ${ASSETS} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\nContent-Type: image/png\r\nContent-Length: ${png.length}\r\nConnection: close\r\nX-Filename: `,
            'latin1',
          ),
          nameBytes,
          Buffer.from('\r\n\r\n', 'latin1'),
        ]);
        // write, not end: a half-closed socket makes the server drop the request.
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(Buffer.concat([head, png])));
        let raw = '';
        socket.on('data', (d: Buffer) => (raw += d.toString('utf8')));
        socket.on('close', () => resolve(raw.slice(raw.indexOf('\r\n\r\n') + 4)));
        socket.on('error', reject);
      });
    const idOf = (body: string) => (JSON.parse(body) as { asset: { id: string } }).asset.id;
    const name = 'Ünïcødé café — 東京 🌅.png';
    const utf8 = await assetStore.findAsset(s.db, idOf(await send(Buffer.from(name, 'utf8'))));
    assert.equal(utf8!.filename, name);
    const latin1 = await assetStore.findAsset(s.db, idOf(await send(Buffer.from('café.png', 'latin1'))));
    assert.equal(latin1!.filename, 'café.png', 'a lone 0xE9 is not UTF-8: read as ISO-8859-1');
    // A right-to-left override makes "invoice\u202efdp.exe" show as "invoiceexe.pdf": the controls are dropped.
    const reversed = await assetStore.findAsset(s.db, idOf(await send(Buffer.from('invoice\u202efdp.exe\u2066', 'utf8'))));
    assert.equal(reversed!.filename, 'invoicefdp.exe');
  });

  it('when the Content-Type is not one the contract lists, then 422 names the types an upload takes', async () => {
    const e = await errorOf(await upload(await media.image('png'), 'image/bmp'));
    assert.equal(e.status, 422);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, /Unsupported Content-Type "image\/bmp" for an asset upload; send one of image\/png, image\/jpeg, .*audio\/webm\./);
  });

  it('when the same bytes are uploaded twice, then two assets share one content-addressed blob', async () => {
    const file = await media.image('gif');
    const a = await created(await upload(file, 'image/gif'));
    const b = await created(await upload(file, 'image/gif'));
    assert.notEqual(a.id, b.id);
    assert.equal(a.blob_sha256, b.blob_sha256);
    assert.deepEqual(fs.readFileSync(blobPath(s.dataDir, a.blob_sha256)), fs.readFileSync(file));
  });

  it('when the key is missing, then 401; when it lacks generate, then 403, before any body is read', async () => {
    const png = await media.image('png');
    const none = await fetch(new URL(ASSETS, s.url), { method: 'POST', headers: { 'content-type': 'image/png' }, body: fs.readFileSync(png) });
    assert.equal((await errorOf(none)).code, 'INVALID_API_KEY');
    const readOnly = (await s.key(accountId, { scopes: ['read'] })).secret;
    const e = await errorOf(await upload(media.wavOfSize(MAX_ASSET_BYTES + 1), 'audio/wav', {}, readOnly));
    assert.equal(e.status, 403);
    assert.equal(e.code, 'INSUFFICIENT_SCOPE');
  });

  it('when an asset is referenced, then only its owner can use it, of the expected kind, once ready', async () => {
    const row = await created(await upload(await media.image('png'), 'image/png'));
    assert.equal((await requireUsableAsset(s.db, accountId, row.id, ['image'])).id, row.id);
    assert.equal((await requireUsableAsset(s.db, accountId, row.id)).id, row.id);

    const other = await s.user();
    const expectReference = async (fn: Promise<unknown>, status: number, code: string, pattern: RegExp) => {
      await assert.rejects(fn, (e: unknown) => answerOf(e)?.status === status && answerOf(e)?.code === code && pattern.test(answerOf(e)!.message));
    };
    await expectReference(requireUsableAsset(s.db, other.accountId, row.id), 422, 'INVALID_REFERENCE', new RegExp(row.id));
    await expectReference(requireUsableAsset(s.db, accountId, row.id, ['video']), 422, 'INVALID_REFERENCE', /expected a video asset/);
    await expectReference(requireUsableAsset(s.db, accountId, 'asset_000000000000000000000000'), 422, 'INVALID_REFERENCE', /asset_0+/);

    await assetStore.markAssetDeleted(s.db, row.id, new Date().toISOString());
    await expectReference(requireUsableAsset(s.db, accountId, row.id), 422, 'INVALID_REFERENCE', /not usable/);

    await assetStore.insertAsset(s.db, { ...row, id: 'asset_processing00000000000000', state: 'processing', deleted_at: null });
    await expectReference(requireUsableAsset(s.db, accountId, 'asset_processing00000000000000'), 409, 'REFERENCES_PROCESSING', /processing/);
  });

  it('when a task output file is stored, then it becomes a ready output asset of that account with probed metadata', async () => {
    const tools = { blobs: localBlobs(s.dataDir), ffprobePath: s.config.ffprobePath };
    const out = await createOutputAsset(s.db, systemClock, tools, {
      accountId,
      taskId: 'task_x',
      output: { file: await media.video('mp4') },
      mimeType: 'video/mp4',
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    assert.equal(out.origin, 'output');
    assert.equal(out.task_id, 'task_x');
    assert.equal(out.width, 160);
    assert.ok(out.expires_at);
    assert.ok(fs.existsSync(blobPath(s.dataDir, out.blob_sha256)));
    assert.deepEqual(
      (await assetStore.listTaskAssets(s.db, 'task_x')).map((a) => a.id),
      [out.id],
    );
  });
});
