/**
 * Video end to end at the real server: submit → poll → download → the real
 * bytes checked with ffprobe (codec, duration, frame size, audio track) and
 * ffmpeg (first and last frames); every capability rule; money; one identity race.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, download, newKey, submit, waitForTask, type TaskBody } from './helpers/tasks.ts';
import { assertOneIdentityRace } from './helpers/exactly-once.ts';
import { FFMPEG, FFPROBE, tone, video } from './helpers/media.ts';
import { uploadAsset } from './helpers/uploads.ts';
import { runTool } from '../server/media/run.ts';
import { probeAv, type AvProbe } from '../server/media/probe.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

const VIDEO = '/api/generate/video';
const FPS = 24;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-video-test-'));
process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const ffmpeg = (args: string[]) => runTool(FFMPEG, ['-v', 'error', '-nostdin', '-y', ...args], { timeoutMs: 120_000 });

const solid = (r: number, g: number, b: number, width = 64, height = 48) =>
  sharp({ create: { width, height, channels: 3, background: { r, g, b } } })
    .png()
    .toBuffer();

/** A small test-pattern MP4 of `seconds` (reference video fixtures of a chosen length). */
async function clip(seconds: number): Promise<string> {
  const file = path.join(dir, `clip-${seconds}.mp4`);
  await ffmpeg([
    '-f',
    'lavfi',
    '-i',
    `testsrc=size=160x120:rate=10:duration=${seconds}`,
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-pix_fmt',
    'yuv420p',
    file,
  ]);
  return file;
}

/** Downloads the task's only successful output to a file and probes it. */
async function fetchVideo(task: TaskBody): Promise<{ file: string; probe: AvProbe; bytes: Buffer }> {
  const out = task.outputs[0];
  assert.equal(out.status, 'succeeded');
  assert.equal(out.asset?.mimeType, 'video/mp4');
  const got = await download(out.asset.url);
  assert.equal(got.status, 200);
  assert.equal(got.type, 'video/mp4');
  const file = path.join(dir, `${out.asset.id}.mp4`);
  fs.writeFileSync(file, got.bytes);
  return { file, probe: await probeAv(FFPROBE, file), bytes: got.bytes };
}

/** Mean RGB of frame `n` of a video (decoded by ffmpeg, measured by sharp). */
async function frameMean(file: string, n: number): Promise<number[]> {
  const png = path.join(dir, `${path.basename(file)}-${n}.png`);
  await ffmpeg(['-i', file, '-vf', `select=eq(n\\,${n})`, '-vsync', '0', '-frames:v', '1', png]);
  const { channels } = await sharp(png).stats();
  return channels.slice(0, 3).map((c) => c.mean);
}

const near = (actual: number[], expected: number[], tolerance: number) =>
  assert.ok(
    actual.every((v, i) => Math.abs(v - expected[i]) <= tolerance),
    `mean ${actual.map((v) => v.toFixed(1))} is not within ${tolerance} of ${expected}`,
  );

/** The real bytes are H.264 of the requested size and duration, with an audio track iff asked for. */
function assertVideo(probe: AvProbe, want: { width: number; height: number; duration: number; audio: boolean }): void {
  assert.match(probe.formatName, /mp4/);
  assert.equal(probe.video?.codec, 'h264');
  assert.equal(probe.video?.width, want.width);
  assert.equal(probe.video?.height, want.height);
  assert.ok(Math.abs(probe.durationSeconds! - want.duration) <= 0.1, `duration ${probe.durationSeconds} vs ${want.duration}`);
  if (want.audio) assert.equal(probe.audio?.codec, 'aac');
  else assert.equal(probe.audio, null);
}

describe('video generation', () => {
  let s: TestServer;
  let user: { accountId: string; keyId: string; secret: string };
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    user = await s.user({ gems: 10_000 });
  });
  after(() => s.close());

  const run = async (body: Record<string, unknown>, quote: number) => {
    const sub = await submit(s, user.secret, VIDEO, body);
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    assert.equal(sub.body.created, true);
    assert.equal(sub.body.task.quotedGems, quote, 'quote = price per second × duration (+ audio per second)');
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assertSettled(task);
    assert.equal(task.chargedGems, quote, 'settled exactly at the quote');
    assert.equal(task.releasedGems, 0);
    return task;
  };

  it('when text-to-video asks for 4 s of 16:9 at 720p without audio, then a real 1280×720 H.264 MP4 of 4 s with no audio track downloads, for 4 Gems a second', async () => {
    const task = await run(
      {
        model: 'gemforge-video-1',
        prompt: 'a red fox running through snow',
        parameters: { mode: 'text-to-video', duration: 4, ratio: '16:9', resolution: '720p', audio: false },
      },
      16,
    );
    const { probe } = await fetchVideo(task);
    assertVideo(probe, { width: 1280, height: 720, duration: 4, audio: false });
  });

  it('when text-to-video asks for 9:16 at 480p with audio, then a 480×854 MP4 of 2 s with an AAC track downloads, priced with audio per second', async () => {
    const task = await run(
      {
        model: 'gemforge-video-1',
        prompt: 'rain on a window',
        parameters: { mode: 'text-to-video', duration: 2, ratio: '9:16', resolution: '480p', audio: true },
      },
      2 * 2 + 1 * 2,
    );
    const { probe } = await fetchVideo(task);
    assertVideo(probe, { width: 480, height: 854, duration: 2, audio: true });
  });

  it('when 1:1 at 1080p and the lite model’s defaults are asked for, then 1080×1080 and 854×480 come back at their prices', async () => {
    const square = await run(
      { model: 'gemforge-video-1', prompt: 'a spinning top', parameters: { mode: 'text-to-video', duration: 2, ratio: '1:1', resolution: '1080p' } },
      16,
    );
    assertVideo((await fetchVideo(square)).probe, { width: 1080, height: 1080, duration: 2, audio: false });
    const lite = await run({ model: 'gemforge-video-lite-1', prompt: 'a paper boat', parameters: { mode: 'text-to-video' } }, 2);
    assertVideo((await fetchVideo(lite)).probe, { width: 854, height: 480, duration: 2, audio: false });
  });

  it('when the prompt and seed repeat, then the video repeats byte for byte; when the prompt changes, then it differs', async () => {
    const make = async (prompt: string) => {
      const task = await run({ model: 'gemforge-video-lite-1', prompt, parameters: { mode: 'text-to-video', seed: 11 } }, 2);
      return crypto
        .createHash('sha256')
        .update((await fetchVideo(task)).bytes)
        .digest('hex');
    };
    const [a1, a2, b] = [await make('a blue whale'), await make('a blue whale'), await make('a green frog')];
    assert.equal(a1, a2);
    assert.notEqual(a1, b);
  });

  it('when image-to-video has a source image and an end frame, then the first frame is the source and the last frame is the end image', async () => {
    const source = await uploadAsset(s, user.secret, await solid(30, 90, 200), 'image/png');
    const end = await uploadAsset(s, user.secret, await solid(220, 140, 30, 40, 80), 'image/png');
    const task = await run(
      {
        model: 'gemforge-video-1',
        prompt: 'the camera drifts over the sea',
        parameters: { mode: 'image-to-video', sourceImage: source, endFrame: end, duration: 4, ratio: '16:9', resolution: '720p', audio: true },
      },
      4 * 4 + 4,
    );
    const { file, probe } = await fetchVideo(task);
    assertVideo(probe, { width: 1280, height: 720, duration: 4, audio: true });
    near(await frameMean(file, 0), [30, 90, 200], 8);
    near(await frameMean(file, 4 * FPS - 1), [220, 140, 30], 8);
    const middle = await frameMean(file, 2 * FPS);
    assert.ok(
      middle.some((v, i) => Math.abs(v - [30, 90, 200][i]) > 10),
      'the middle has moved away from the source',
    );
  });

  it('when image-to-video has a source image and a top-level reference image, then the video starts on the source (never the reference) and moves away from it', async () => {
    const source = await uploadAsset(s, user.secret, await solid(240, 240, 240), 'image/png');
    const red = await uploadAsset(s, user.secret, await solid(200, 20, 20), 'image/png');
    const task = await run(
      {
        model: 'gemforge-video-1',
        prompt: 'fog lifting',
        referenceAssetIds: [red],
        parameters: { mode: 'image-to-video', sourceImage: source, duration: 2, ratio: '9:16', resolution: '480p' },
      },
      4,
    );
    const { file, probe } = await fetchVideo(task);
    assertVideo(probe, { width: 480, height: 854, duration: 2, audio: false });
    near(await frameMean(file, 0), [240, 240, 240], 8);
    const last = await frameMean(file, 2 * FPS - 1);
    assert.ok(
      last.some((v) => Math.abs(v - 240) > 10),
      'motion was blended in over the source',
    );
  });

  it('when a reference image is given, then its colour tints the picture; reference video and audio are used too', async () => {
    const green = await uploadAsset(s, user.secret, await solid(20, 200, 40), 'image/png');
    const refVideo = await uploadAsset(s, user.secret, await video('mp4'), 'video/mp4');
    const refAudio = await uploadAsset(s, user.secret, await tone(2, 330), 'audio/wav');
    const task = await run(
      {
        model: 'gemforge-video-1',
        prompt: 'an abstract composition',
        referenceAssetIds: [green],
        parameters: { mode: 'text-to-video', duration: 2, resolution: '480p', audio: true, referenceVideo: refVideo, referenceAudios: [refAudio] },
      },
      6,
    );
    const { file, probe } = await fetchVideo(task);
    assertVideo(probe, { width: 854, height: 480, duration: 2, audio: true });
    const [r, g, b] = await frameMean(file, 0);
    assert.ok(g > r + 30 && g > b + 30, `green dominates: ${[r, g, b].map((v) => v.toFixed(0))}`);
  });

  it('when a parameter breaks the model’s capabilities or a reference is wrong, then 422 names it (and the allowed values) and nothing is reserved', async () => {
    const other = await s.user();
    const theirs = await uploadAsset(s, other.secret, await solid(1, 2, 3), 'image/png');
    const img = await uploadAsset(s, user.secret, await solid(9, 9, 9), 'image/png');
    const vid = await uploadAsset(s, user.secret, await video('mp4'), 'video/mp4');
    const vid2 = await uploadAsset(s, user.secret, await video('mp4', { audio: false }), 'video/mp4');
    const aud = await uploadAsset(s, user.secret, await tone(2), 'audio/wav');
    const shortVid = await uploadAsset(s, user.secret, await clip(0.5), 'video/mp4');
    const longVid = await uploadAsset(s, user.secret, await clip(12), 'video/mp4');
    const shortAud = await uploadAsset(s, user.secret, await tone(0.5), 'audio/wav');
    const longAud = await uploadAsset(s, user.secret, await tone(31), 'audio/wav');
    const V1 = 'gemforge-video-1';
    const LITE = 'gemforge-video-lite-1';
    const t2v = (parameters: Record<string, unknown> = {}, extra: Record<string, unknown> = {}, model = V1) => ({
      model,
      prompt: 'x',
      parameters: { mode: 'text-to-video', ...parameters },
      ...extra,
    });
    const i2v = (parameters: Record<string, unknown> = {}) => ({
      model: V1,
      prompt: 'x',
      parameters: { mode: 'image-to-video', sourceImage: img, ...parameters },
    });
    const cases: Array<[unknown, string, RegExp]> = [
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { mode: 'text-to-video' } }, 'MODEL_UNAVAILABLE', /gemforge-image-1.*not a video model/],
      [{ model: 'gemforge-video-9', prompt: 'x', parameters: { mode: 'text-to-video' } }, 'MODEL_UNAVAILABLE', /gemforge-video-9/],
      [{ model: V1, prompt: 'x' }, 'INVALID_REQUEST', /must have required property 'parameters'/],
      [{ model: V1, prompt: 'x', parameters: { duration: 4 } }, 'INVALID_REQUEST', /parameters\.mode must have required property 'mode'/],
      [{ model: V1, prompt: 'x', parameters: { mode: 'video-to-video' } }, 'INVALID_REQUEST', /mode/],
      [
        { model: LITE, prompt: 'x', parameters: { mode: 'image-to-video', sourceImage: img } },
        'INVALID_REQUEST',
        /parameters\.mode "image-to-video" is not supported by model gemforge-video-lite-1; allowed values: text-to-video\./,
      ],
      [{ model: V1, prompt: 'x', parameters: { mode: 'image-to-video' } }, 'INVALID_REQUEST', /parameters\.sourceImage is required with mode image-to-video/],
      [t2v({ sourceImage: img }), 'INVALID_REQUEST', /parameters\.sourceImage is only used with mode image-to-video/],
      [t2v({ endFrame: img }, {}, LITE), 'INVALID_REQUEST', /parameters\.endFrame is not supported by model gemforge-video-lite-1/],
      [t2v({ duration: 5 }), 'INVALID_REQUEST', /parameters\.duration "5" is not supported by model gemforge-video-1; allowed values: 2, 4, 6, 8\./],
      [t2v({ duration: 6 }, {}, LITE), 'INVALID_REQUEST', /parameters\.duration "6".*allowed values: 2, 4\./],
      [t2v({ duration: 0 }), 'INVALID_REQUEST', /duration/],
      [t2v({ ratio: '4:3' }), 'INVALID_REQUEST', /parameters\.ratio "4:3".*allowed values: 16:9, 9:16, 1:1\./],
      [t2v({ ratio: '1:1' }, {}, LITE), 'INVALID_REQUEST', /parameters\.ratio "1:1".*allowed values: 16:9, 9:16\./],
      [t2v({ resolution: '1080p' }, {}, LITE), 'INVALID_REQUEST', /parameters\.resolution "1080p".*allowed values: 480p, 720p\./],
      [t2v({ resolution: '4k' }), 'INVALID_REQUEST', /parameters\.resolution "4k".*allowed values: 480p, 720p, 1080p\./],
      [t2v({ audio: true }, {}, LITE), 'INVALID_REQUEST', /parameters\.audio "true" is not supported by model gemforge-video-lite-1; allowed values: false\./],
      [
        t2v({ referenceVideos: [vid, vid2] }),
        'INVALID_REQUEST',
        /parameters\.referenceVideos names 2 reference videos; model gemforge-video-1 accepts at most 1\./,
      ],
      [
        t2v({ referenceVideo: vid, referenceVideos: [vid2] }),
        'INVALID_REQUEST',
        /parameters\.referenceVideo and referenceVideos together names 2 reference videos.*at most 1/,
      ],
      [t2v({ referenceVideo: vid }, {}, LITE), 'INVALID_REQUEST', /parameters\.referenceVideo is not supported by model gemforge-video-lite-1/],
      [t2v({ referenceAudios: [aud, aud] }), 'INVALID_REQUEST', /parameters\.referenceAudios names 2 reference audios; .*at most 1\./],
      [t2v({ referenceAudios: [aud] }, {}, LITE), 'INVALID_REQUEST', /parameters\.referenceAudios is not supported by model gemforge-video-lite-1/],
      [
        t2v({ resolution: '1080p' }, { referenceAssetIds: [img, img] }),
        'INVALID_REQUEST',
        /referenceAssetIds names 2 visual reference images at resolution 1080p; model gemforge-video-1 accepts at most 1\./,
      ],
      [
        t2v({ resolution: '720p' }, { referenceAssetIds: [img, img, img, img] }),
        'INVALID_REQUEST',
        /referenceAssetIds names 4 .*at resolution 720p.*at most 3/,
      ],
      [t2v({}, { referenceAssetIds: [img] }, LITE), 'INVALID_REQUEST', /referenceAssetIds is not supported by model gemforge-video-lite-1/],
      [
        { model: V1, prompt: 'p'.repeat(5001), parameters: { mode: 'text-to-video' } },
        'INVALID_REQUEST',
        /prompt is 5001 characters; model gemforge-video-1 accepts at most 5000/,
      ],
      [t2v({ provider: 'other' }), 'INVALID_REQUEST', /provider/],
      [t2v({ negativePrompt: 'blur' }), 'INVALID_REQUEST', /negativePrompt/],
      [
        i2v({ sourceImage: theirs }),
        'INVALID_REFERENCE',
        new RegExp(`^parameters\\.sourceImage: Reference asset ${theirs} is not usable: .*owned by this account`),
      ],
      [i2v({ sourceImage: vid }), 'INVALID_REFERENCE', new RegExp(`^parameters\\.sourceImage: .*${vid} is a video asset; expected an image`)],
      [i2v({ endFrame: aud }), 'INVALID_REFERENCE', new RegExp(`^parameters\\.endFrame: .*${aud} is an audio asset; expected an image`)],
      [t2v({ referenceVideos: [img] }), 'INVALID_REFERENCE', new RegExp(`^parameters\\.referenceVideos\\[0\\]: .*${img} is an image asset; expected a video`)],
      [t2v({ referenceAudios: [vid] }), 'INVALID_REFERENCE', new RegExp(`^parameters\\.referenceAudios\\[0\\]: .*${vid} is a video asset; expected an audio`)],
      [t2v({}, { referenceAssetIds: [img, vid] }), 'INVALID_REFERENCE', new RegExp(`^referenceAssetIds\\[1\\]: .*${vid} is a video asset; expected an image`)],
      [t2v({ referenceVideo: 'asset_missing' }), 'INVALID_REFERENCE', /^parameters\.referenceVideo: .*asset_missing/],
      [
        t2v({ referenceVideo: shortVid }),
        'INVALID_REFERENCE',
        /parameters\.referenceVideo: video asset \S+ is 0\.5 s long; model gemforge-video-1 accepts reference video of 1–10 s\./,
      ],
      [t2v({ referenceVideos: [longVid] }), 'INVALID_REFERENCE', /parameters\.referenceVideos\[0\]: video asset \S+ is 12(\.\d+)? s long; .*1–10 s/],
      [
        t2v({ referenceAudios: [shortAud] }),
        'INVALID_REFERENCE',
        /parameters\.referenceAudios\[0\]: audio asset \S+ is 0\.5 s long; .*reference audio of 1–30 s/,
      ],
      [t2v({ referenceAudios: [longAud] }), 'INVALID_REFERENCE', /parameters\.referenceAudios\[0\]: audio asset \S+ is 31(\.\d+)? s long; .*1–30 s/],
    ];
    const before = await ledger.balanceOf(s.db, user.accountId);
    for (const [body, code, message] of cases) {
      const res = await submit(s, user.secret, VIDEO, body);
      assert.deepEqual(
        { status: res.status, code: res.body.error?.code, message: message.test(res.body.error?.message ?? '') },
        { status: 422, code, message: true },
        `${JSON.stringify(body).slice(0, 160)} → ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
      );
    }
    assert.equal(await ledger.balanceOf(s.db, user.accountId), before, 'rejections reserve nothing');
  });

  it('when the quote is above maxGems, then 409 PRICE_CHANGED; a replay of an accepted submission answers 200 with the same task', async () => {
    const body = { model: 'gemforge-video-1', prompt: 'replay me', parameters: { mode: 'text-to-video', duration: 8, resolution: '1080p', audio: true } };
    const ceiling = await submit(s, user.secret, VIDEO, { ...body, maxGems: 71 });
    assert.equal(ceiling.status, 409);
    assert.equal(ceiling.body.error.code, 'PRICE_CHANGED');
    const cheap = { ...body, parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' }, maxGems: 4 };
    const first = await submit(s, user.secret, VIDEO, cheap);
    assert.equal(first.status, 202);
    const replay = await submit(s, user.secret, VIDEO, cheap, first.idemKey);
    assert.equal(replay.status, 200);
    assert.equal(replay.body.created, false);
    assert.equal(replay.body.task.id, first.body.task.id);
    assertSettled(await waitForTask(s, user.secret, first.body.task.id));
  });

  it('when 100 video submissions with one identity arrive at once, then one task and one reservation exist and the rest replay or answer REQUEST_UNCERTAIN', async () => {
    const racer = await s.user({ gems: 100 });
    const body = { model: 'gemforge-video-lite-1', prompt: 'one of a kind', parameters: { mode: 'text-to-video' } };
    const race = await assertOneIdentityRace(s.db, {
      url: s.url,
      path: VIDEO,
      key: racer.secret,
      idemKey: newKey('video-race'),
      body,
      accountId: racer.accountId,
      n: 100,
    });
    assert.equal(race.statuses[202], 1);
    const ids = new Set(race.bodies.filter((r) => r.status !== 409).map((r) => (r.body as { task: { id: string } }).task.id));
    assert.equal(ids.size, 1);
    assertSettled(await waitForTask(s, racer.secret, [...ids][0]));
    assert.equal(await ledger.balanceOf(s.db, racer.accountId), 98);
  });

  it('when a video prompt carries [[scenario:fail]] or [[scenario:partial]], then the task fails with nothing charged, or ends partial with its real video charged half the quote', async () => {
    const params = { mode: 'text-to-video', duration: 2, resolution: '720p' }; // 8 Gems
    const failed = await waitForTask(
      s,
      user.secret,
      (await submit(s, user.secret, VIDEO, { model: 'gemforge-video-1', prompt: 'a cat [[scenario:fail]]', parameters: params })).body.task.id,
    );
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.code, 'GENERATION_FAILED');
    assert.equal(failed.chargedGems, 0);
    assert.equal(failed.releasedGems, 8);
    assertSettled(failed);

    const partial = await waitForTask(
      s,
      user.secret,
      (await submit(s, user.secret, VIDEO, { model: 'gemforge-video-1', prompt: 'a dog [[scenario:partial]]', parameters: params })).body.task.id,
    );
    assert.equal(partial.status, 'partial');
    assert.deepEqual(
      partial.outputs.map((o) => o.status),
      ['succeeded', 'failed'],
    );
    assert.equal(partial.chargedGems, 4);
    assert.equal(partial.releasedGems, 4);
    assertSettled(partial);
    assertVideo((await fetchVideo(partial)).probe, { width: 1280, height: 720, duration: 2, audio: false });
  });

  it('when everything above settled, then ledger verify finds no problem', async () => {
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
  });
});
