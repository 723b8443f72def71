/** Images end to end at the real server: submit → poll → download → the real bytes. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import sharp from 'sharp';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, download, newKey, submit, waitForTask } from './helpers/tasks.ts';
import { video } from './helpers/media.ts';
import { OffsetClock } from './helpers/db.ts';
import { until } from './helpers/poll.ts';
import { uploadAsset } from './helpers/uploads.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

const IMAGE = '/api/generate/image';

const solid = (r: number, g: number, b: number) =>
  sharp({ create: { width: 64, height: 64, channels: 3, background: { r, g, b } } })
    .png()
    .toBuffer();

describe('image generation', () => {
  let s: TestServer;
  let user: { accountId: string; keyId: string; secret: string };
  const clock = new OffsetClock();
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' }, clock });
    user = await s.user({ gems: 10_000 });
  });
  after(() => s.close());

  it('when two 16:9 PNGs are requested, then two real 1024×576 PNGs download through signed URLs and exactly their price is charged', async () => {
    const sub = await submit(s, user.secret, IMAGE, {
      model: 'gemforge-image-1',
      prompt: 'a red fox in the snow',
      parameters: { outputCount: 2, ratio: '16:9', resolution: '1024' },
    });
    assert.equal(sub.status, 202);
    assert.equal(sub.body.created, true);
    assert.equal(sub.body.task.status, 'queued');
    assert.equal(sub.body.task.quotedGems, 8);
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'succeeded');
    assertSettled(task);
    assert.equal(task.chargedGems, 8);
    assert.equal(task.outputs.length, 2);
    for (const o of task.outputs) {
      assert.equal(o.status, 'succeeded');
      assert.equal(o.asset?.mimeType, 'image/png');
      assert.match(o.asset.url, /^http:\/\/127\.0\.0\.1:\d+\/files\/asset_[0-9a-f]+\?expires=\d+&sig=[0-9a-f]{64}$/);
      const file = await download(o.asset.url);
      assert.equal(file.status, 200);
      assert.equal(file.type, 'image/png');
      const meta = await sharp(file.bytes).metadata();
      assert.equal(meta.format, 'png');
      assert.equal(meta.width, 1024);
      assert.equal(meta.height, 576);
      assert.equal(meta.hasAlpha, false);
    }
    const [a, b] = await Promise.all(task.outputs.map((o) => download(o.asset!.url)));
    assert.notDeepEqual(a.bytes, b.bytes, 'each output is its own picture');
  });

  it('when the background is transparent, then the PNG has a real alpha channel with transparent pixels', async () => {
    const sub = await submit(s, user.secret, IMAGE, {
      model: 'gemforge-image-1',
      prompt: 'floating shapes',
      parameters: { background: 'transparent', ratio: '3:4', resolution: '512' },
    });
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    const file = await download(task.outputs[0].asset!.url);
    const meta = await sharp(file.bytes).metadata();
    assert.equal(meta.hasAlpha, true);
    assert.equal(meta.width, 384);
    assert.equal(meta.height, 512);
    const stats = await sharp(file.bytes).stats();
    assert.equal(stats.channels[3].min, 0, 'some pixels are fully transparent');
    assert.ok(stats.channels[3].max >= 200, 'some pixels are (nearly) opaque');
  });

  it('when JPEG or WebP is asked for, then the bytes are that format', async () => {
    for (const [format, mime] of [
      ['jpeg', 'image/jpeg'],
      ['webp', 'image/webp'],
    ] as const) {
      const sub = await submit(s, user.secret, IMAGE, {
        model: 'gemforge-image-1',
        prompt: 'a lighthouse',
        parameters: { outputFormat: format, resolution: '512' },
      });
      const task = await waitForTask(s, user.secret, sub.body.task.id);
      assert.equal(task.outputs[0].asset?.mimeType, mime);
      const file = await download(task.outputs[0].asset.url);
      assert.equal((await sharp(file.bytes).metadata()).format, format);
    }
  });

  it('when the prompt and seed repeat, then the picture repeats; when the prompt changes, then it differs', async () => {
    const make = async (prompt: string) => {
      const sub = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt, parameters: { seed: 7, resolution: '512' } });
      const task = await waitForTask(s, user.secret, sub.body.task.id);
      return crypto
        .createHash('sha256')
        .update((await download(task.outputs[0].asset!.url)).bytes)
        .digest('hex');
    };
    const [a1, a2, b] = [await make('a blue whale'), await make('a blue whale'), await make('a green frog')];
    assert.equal(a1, a2);
    assert.notEqual(a1, b);
  });

  it('when an edit model gets a source image, then it transforms it at the requested size; without one, 422', async () => {
    const missing = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-edit-1', prompt: 'make it night' });
    assert.equal(missing.status, 422);
    assert.match(missing.body.error.message, /sourceImage is required/);
    const source = await uploadAsset(s, user.secret, await solid(200, 200, 200), 'image/png');
    const sub = await submit(s, user.secret, IMAGE, {
      model: 'gemforge-image-edit-1',
      prompt: 'make it night',
      parameters: { sourceImage: source, resolution: '512' },
    });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'succeeded');
    const out = await download(task.outputs[0].asset!.url);
    const meta = await sharp(out.bytes).metadata();
    assert.equal(meta.width, 512);
    assert.equal(meta.height, 512);
    const stats = await sharp(out.bytes).stats();
    assert.ok(
      stats.channels.some((c) => Math.abs(c.mean - 200) > 10),
      'the source was visibly transformed',
    );
  });

  it('when reference images are given, then their colours lead the palette', async () => {
    const green = await uploadAsset(s, user.secret, await solid(20, 200, 40), 'image/png');
    const sub = await submit(s, user.secret, IMAGE, {
      model: 'gemforge-image-1',
      prompt: 'an abstract composition',
      referenceAssetIds: [green],
      parameters: { resolution: '512' },
    });
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    const { channels } = await sharp((await download(task.outputs[0].asset!.url)).bytes).stats();
    assert.ok(
      channels[1].mean > channels[0].mean + 40 && channels[1].mean > channels[2].mean + 40,
      `green dominates: ${channels.map((c) => c.mean.toFixed(0))}`,
    );
  });

  it('when a parameter breaks the model’s capabilities, then 422 names it and the allowed values', async () => {
    const cases: Array<[unknown, number, string, RegExp]> = [
      [{ model: 'gemforge-image-9', prompt: 'x' }, 422, 'MODEL_UNAVAILABLE', /gemforge-image-9/],
      [{ model: 'gemforge-image-legacy', prompt: 'x' }, 422, 'MODEL_UNAVAILABLE', /not available/],
      [{ model: 'gemforge-video-1', prompt: 'x' }, 422, 'MODEL_UNAVAILABLE', /image model/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { ratio: '5:1' } }, 422, 'INVALID_REQUEST', /ratio "5:1".*allowed values: 1:1, 4:3/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { resolution: '4096' } }, 422, 'INVALID_REQUEST', /resolution/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { outputCount: 5 } }, 422, 'INVALID_REQUEST', /outputCount/],
      [{ model: 'gemforge-image-edit-1', prompt: 'x', parameters: { outputCount: 3, sourceImage: 'asset_x' } }, 422, 'INVALID_REQUEST', /maximum of 2/],
      [
        { model: 'gemforge-image-edit-1', prompt: 'x', parameters: { negativePrompt: 'blur', sourceImage: 'asset_x' } },
        422,
        'INVALID_REQUEST',
        /negativePrompt is not supported/,
      ],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { negativePrompt: 'n'.repeat(1001) } }, 422, 'INVALID_REQUEST', /negativePrompt/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { background: 'glass' } }, 422, 'INVALID_REQUEST', /background/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { variant: 'retro' } }, 422, 'INVALID_REQUEST', /variant "retro"/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { background: 'transparent', outputFormat: 'jpeg' } }, 422, 'INVALID_REQUEST', /alpha/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { provider: 'other' } }, 422, 'INVALID_REQUEST', /provider/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { model: 'other' } }, 422, 'INVALID_REQUEST', /model/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { prompt: 'other' } }, 422, 'INVALID_REQUEST', /prompt/],
      [{ model: 'gemforge-image-1', prompt: 'x', parameters: { sourceTool: 'other' } }, 422, 'INVALID_REQUEST', /sourceTool/],
      [{ model: 'gemforge-image-1', prompt: 'x', extra: 1 }, 422, 'INVALID_REQUEST', /extra/],
      [{ model: 'gemforge-image-1', prompt: 'p'.repeat(30_001) }, 422, 'INVALID_REQUEST', /prompt/],
      [{ model: 'gemforge-image-1', prompt: 'x', referenceAssetIds: Array(11).fill('a') }, 422, 'INVALID_REQUEST', /referenceAssetIds/],
      [{ model: 'gemforge-image-1', prompt: 'x', referenceAssetIds: ['https://example.com/cat.png'] }, 422, 'INVALID_REFERENCE', /example\.com/],
      [{ model: 'gemforge-image-1', prompt: 'x', maxGems: -1 }, 422, 'INVALID_REQUEST', /maxGems/],
    ];
    for (const [body, status, code, message] of cases) {
      const res = await submit(s, user.secret, IMAGE, body);
      assert.equal(res.status, status, JSON.stringify(body).slice(0, 120));
      assert.equal(res.body.error.code, code, JSON.stringify(body).slice(0, 120));
      assert.match(res.body.error.message, message);
    }
  });

  it('when a reference is another account’s, or not an image, then 422 INVALID_REFERENCE', async () => {
    const other = await s.user();
    const theirs = await uploadAsset(s, other.secret, await solid(1, 2, 3), 'image/png');
    const res = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'x', referenceAssetIds: [theirs] });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'INVALID_REFERENCE');
    const clip = await uploadAsset(s, user.secret, fs.readFileSync(await video('mp4')), 'video/mp4');
    const wrongKind = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'x', referenceAssetIds: [clip] });
    assert.equal(wrongKind.body.error.code, 'INVALID_REFERENCE');
    assert.match(wrongKind.body.error.message, /video/);
  });

  it('when money or ceilings refuse the quote, then nothing is reserved and the same identity succeeds once they allow it', async () => {
    const poor = await s.user({ gems: 3 });
    const idemKey = newKey('money');
    const body = { model: 'gemforge-image-1', prompt: 'x', parameters: { resolution: '512' } }; // 2 Gems
    const ceiling = await submit(s, poor.secret, IMAGE, { ...body, maxGems: 1 });
    assert.equal(ceiling.status, 409);
    assert.equal(ceiling.body.error.code, 'PRICE_CHANGED');
    assert.equal(ceiling.headers.get('x-should-retry'), 'false');
    const big = await submit(s, poor.secret, IMAGE, { ...body, parameters: { resolution: '2048' } }, idemKey);
    assert.equal(big.status, 402);
    assert.equal(big.body.error.code, 'INSUFFICIENT_GEMS');
    assert.match(big.body.error.message, /balance of 3 Gems.*needs 8 Gems/);
    assert.equal(await ledger.balanceOf(s.db, poor.accountId), 3);
    await ledger.credit(s.db, { now: () => new Date() }, poor.accountId, 10, 'top-up');
    const retry = await submit(s, poor.secret, IMAGE, { ...body, parameters: { resolution: '2048' } }, idemKey);
    assert.equal(retry.status, 202, 'the same identity works once the balance allows it');

    const capped = await s.user({ cap: 3 });
    const capRes = await submit(s, capped.secret, IMAGE, { ...body, parameters: { resolution: '1024' } });
    assert.equal(capRes.status, 402);
    assert.equal(capRes.body.error.code, 'API_KEY_LIMIT');
    assert.match(capRes.body.error.message, /cap of 3 Gems/);
  });

  it('when a submission is replayed, then 200 created:false with the same task; with another body, then 409 IDEMPOTENCY_CONFLICT', async () => {
    const body = { model: 'gemforge-image-1', prompt: 'replay me', parameters: { resolution: '512' } };
    const first = await submit(s, user.secret, IMAGE, body);
    const replay = await submit(s, user.secret, IMAGE, { parameters: { resolution: '512' }, prompt: 'replay me', model: 'gemforge-image-1' }, first.idemKey);
    assert.equal(replay.status, 200);
    assert.equal(replay.body.created, false);
    assert.equal(replay.body.task.id, first.body.task.id);
    // The spec's defaults written out are the same request.
    const explicit = await submit(s, user.secret, IMAGE, { ...body, referenceAssetIds: [] }, first.idemKey);
    assert.equal(explicit.status, 200, JSON.stringify(explicit.body));
    assert.equal(explicit.body.task.id, first.body.task.id);
    const before = await ledger.balanceOf(s.db, user.accountId);
    const changed = await submit(s, user.secret, IMAGE, { ...body, prompt: 'something else' }, first.idemKey);
    assert.equal(changed.status, 409);
    assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
    assert.equal(changed.headers.get('x-should-retry'), 'false');
    const otherOp = await submit(
      s,
      user.secret,
      '/api/generate/text/v1/chat/completions',
      { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'replay me' }] },
      first.idemKey,
    );
    assert.equal(otherOp.status, 409, JSON.stringify(otherOp.body));
    assert.equal(await ledger.balanceOf(s.db, user.accountId), before, 'replays and conflicts charge nothing');
  });

  it('when a task is read by its owner, then GET and HEAD answer 200; another account, an unknown id or no read scope cannot', async () => {
    const sub = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'owned', parameters: { resolution: '512' } });
    const id = sub.body.task.id;
    const head = await s.call('HEAD', `/api/generate/tasks/${id}`, { key: user.secret });
    assert.equal(head.status, 200);
    assert.equal((await head.text()).length, 0);
    const other = await s.user();
    const theirs = await s.call('GET', `/api/generate/tasks/${id}`, { key: other.secret });
    assert.equal(theirs.status, 404);
    assert.equal((await errorOf(theirs)).code, 'NOT_FOUND');
    const headOther = await s.call('HEAD', `/api/generate/tasks/${id}`, { key: other.secret });
    assert.equal(headOther.status, 404);
    assert.equal((await headOther.text()).length, 0);
    assert.equal((await s.call('GET', '/api/generate/tasks/task_nope', { key: user.secret })).status, 404);
    const generateOnly = await s.key(user.accountId, { scopes: ['generate'] });
    assert.equal((await s.call('GET', `/api/generate/tasks/${id}`, { key: generateOnly.secret })).status, 403);
  });

  it('when a signed URL is tampered with, then the envelope comes back instead of the bytes; each read mints a fresh URL', async () => {
    const sub = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'signed', parameters: { resolution: '512' } });
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    const url = new URL(task.outputs[0].asset!.url);
    const badSig = new URL(url);
    badSig.searchParams.set('sig', '0'.repeat(64));
    const bad = await fetch(badSig);
    assert.equal(bad.status, 403);
    assert.equal((await errorOf(bad)).code, 'INVALID_SIGNATURE');
    const later = new URL(url);
    later.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 1000));
    assert.equal((await fetch(later)).status, 403, 'a longer expiry needs a new signature');
    const otherAsset = new URL(url.toString().replace(task.outputs[0].asset!.id, 'asset_000000000000000000000000'));
    assert.equal((await fetch(otherAsset)).status, 403);
    clock.advance(1000); // the next second: a fresh link has a later expiry
    const again = await waitForTask(s, user.secret, task.id);
    assert.notEqual(again.outputs[0].asset!.url, task.outputs[0].asset!.url);
  });

  it('when everything above settled, then ledger verify finds no problem', async () => {
    const report = await verifyLedger(s.db, [verifyTasks]);
    assert.deepEqual(report.problems, []);
  });
});

describe('signed URL expiry and output retention', () => {
  it('when the URL has expired, then 403 URL_EXPIRED; when the retention passed, then the output shows expired with no asset and the bytes are gone', async () => {
    // A link lives a minute, the output two; the server's clock is moved past each (its sweep runs every 200 ms).
    const clock = new OffsetClock();
    const s = await startTestServer({
      clock,
      env: { WORKER_POLL_MS: '20', SIGNED_URL_TTL_SECONDS: '60', OUTPUT_RETENTION_SECONDS: '120', WORKER_LEASE_MS: '400' },
    });
    try {
      const user = await s.user();
      const sub = await submit(s, user.secret, IMAGE, { model: 'gemforge-image-1', prompt: 'short lived', parameters: { resolution: '512' } });
      const task = await waitForTask(s, user.secret, sub.body.task.id);
      const url = task.outputs[0].asset!.url;
      assert.equal((await download(url)).status, 200);
      clock.advance(61_000);
      const expired = await fetch(url);
      assert.equal(expired.status, 403);
      assert.equal((await errorOf(expired)).code, 'URL_EXPIRED');
      assert.equal((await waitForTask(s, user.secret, task.id)).outputs[0].status, 'succeeded', 'within its retention the output stays');
      clock.advance(60_000);
      const view = await until(
        'the output expired',
        async () => {
          const t = await waitForTask(s, user.secret, task.id);
          return t.outputs[0].status === 'expired' && t;
        },
        10_000,
      );
      assert.equal(view.outputs[0].status, 'expired');
      assert.equal(view.outputs[0].asset, null);
      assert.equal(view.status, 'succeeded', 'the task keeps its status and its money');
      assertSettled(view);
      const rows = await s.db('assets').where({ task_id: task.id });
      assert.ok(rows.every((r: { deleted_at: string | null }) => r.deleted_at));
    } finally {
      await s.close();
    }
  });
});
