/**
 * Video analysis at the real server: videos with known cuts made by
 * ffmpeg and uploaded as assets; segments and frames at the cut times; every
 * limit and error; money (reservation, measured charge, allowance and consent,
 * maxGems); replays without a second charge; scenario triggers; one-identity race.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { expectError, startTestServer, type TestServer } from './helpers/server.ts';
import { uploadAsset } from './helpers/uploads.ts';
import { image } from './helpers/media.ts';
import { assertOneIdentityRace } from './helpers/exactly-once.ts';
import { bigVideo, cutTimes, longTinyVideo, RGB_SHOTS, shotsVideo } from './helpers/videos.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';
import type { ReservationRow } from '../server/storage/ledger.ts';

const PATH = '/api/generate/extract/video';
const MODEL = 'gemforge-video-analysis-1';
/** ceil((262,144 × 0.25 + 8,192 × 1) / 1000) at the catalog's rates. */
const RESERVED = 74;
/** How far a detected cut may be from where the video was cut. */
const TOLERANCE = 0.25;
let counter = 0;
const newKey = (tag = 'k') => `extract-${tag}-${process.pid}-${++counter}`;

interface Extraction {
  id: string;
  extraction: {
    analysis: string;
    durationSeconds: number;
    frames: Array<{ timeSeconds: number; reason: string; score?: number }>;
    segments?: Array<{ startSeconds: number; endSeconds: number; description: string }>;
  };
}

type User = { accountId: string; keyId: string; secret: string };

const near = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= TOLERANCE, `${what}: ${actual} is not within ${TOLERANCE} s of ${expected}`);

/** The contract's promises about frames and segments. */
function assertWellFormed(x: Extraction['extraction']): void {
  const times = x.frames.map((f) => f.timeSeconds);
  assert.deepEqual(
    times,
    [...times].sort((a, b) => a - b),
    'frames sorted',
  );
  assert.equal(new Set(times).size, times.length, 'frame times unique');
  for (const f of x.frames) {
    assert.ok(f.timeSeconds >= 0 && f.timeSeconds <= x.durationSeconds, `frame ${f.timeSeconds} within the duration`);
    assert.ok(['scene_start', 'sharpest', 'representative'].includes(f.reason));
    if (f.score !== undefined) assert.ok(f.score >= 0 && f.score <= 1);
  }
  const segments = x.segments ?? [];
  assert.ok(segments.length > 0);
  assert.equal(segments[0].startSeconds, 0, 'segments start at 0');
  assert.equal(segments.at(-1)!.endSeconds, x.durationSeconds, 'segments cover the video');
  for (let i = 0; i < segments.length; i++) {
    assert.ok(segments[i].startSeconds < segments[i].endSeconds);
    if (i > 0) assert.equal(segments[i].startSeconds, segments[i - 1].endSeconds, 'segments ordered, touching, not overlapping');
  }
}

describe('video analysis', () => {
  let s: TestServer;
  let user: User;
  let rgbAv: string;
  let rgbSilent: string;

  const post = (key: string, idemKey: string | undefined, body: unknown) =>
    s.call('POST', PATH, { key, body, headers: idemKey ? { 'idempotency-key': idemKey } : {} });

  const upload = (key: string, file: string, type = 'video/mp4') => uploadAsset(s, key, file, type);

  async function analyse(u: User, assetId: string, prompt?: string, idemKey = newKey()): Promise<Extraction> {
    const res = await post(u.secret, idemKey, { model: MODEL, videoAssetId: assetId, ...(prompt === undefined ? {} : { prompt }) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return JSON.parse(text) as Extraction;
  }

  const reservations = async (accountId: string) => (await s.db('reservations').where({ account_id: accountId }).orderBy('created_at')) as ReservationRow[];
  const summary = (u: User) => ledger.accountSummary(s.db, systemClock, u.accountId, [u.keyId]);

  before(async () => {
    s = await startTestServer();
    user = await s.user({ llmAllowance: 10_000 });
    [rgbAv, rgbSilent] = await Promise.all([shotsVideo('rgb-av', RGB_SHOTS, { audio: true }), shotsVideo('rgb', RGB_SHOTS)]);
  });
  after(() => s.close());

  describe('analysis', () => {
    it('when a video cut red → green → blue is analysed, then segments and scene-start frames sit at the cuts and the summary names what was measured', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const assetId = await upload(u.secret, rgbAv);
      const r = await analyse(u, assetId, 'How many scenes are there, is there audio, and what colours?');
      assert.deepEqual(Object.keys(r).sort(), ['extraction', 'id']);
      assert.match(r.id, /^ext_[0-9a-f]{24}$/);
      const x = r.extraction;
      assert.deepEqual(Object.keys(x).sort(), ['analysis', 'durationSeconds', 'frames', 'segments']);
      assert.ok(Math.abs(x.durationSeconds - 6) < 0.1, `duration ${x.durationSeconds}`);
      assertWellFormed(x);

      const cuts = cutTimes(RGB_SHOTS); // [2, 4.5]
      const segments = x.segments!;
      assert.equal(segments.length, 3, JSON.stringify(segments));
      near(segments[0].endSeconds, cuts[0], 'first cut');
      near(segments[1].endSeconds, cuts[1], 'second cut');
      assert.match(segments[0].description, /Mostly red/);
      assert.match(segments[1].description, /Mostly green/);
      assert.match(segments[2].description, /Mostly blue/);

      const starts = x.frames.filter((f) => f.reason === 'scene_start').map((f) => f.timeSeconds);
      assert.equal(starts.length, 3);
      assert.equal(starts[0], 0);
      near(starts[1], cuts[0], 'scene start 2');
      near(starts[2], cuts[1], 'scene start 3');
      // One more suggestion inside each scene (flat colour: its representative frame).
      for (const seg of segments) {
        assert.ok(
          x.frames.some((f) => f.reason !== 'scene_start' && f.timeSeconds > seg.startSeconds && f.timeSeconds < seg.endSeconds),
          `a suggested frame inside ${seg.startSeconds}–${seg.endSeconds}`,
        );
      }

      assert.match(x.analysis, /320×180/);
      assert.match(x.analysis, /3 scenes/);
      assert.match(x.analysis, /an audio track \(mean level -?\d/);
      assert.match(x.analysis, /red/);
      assert.match(x.analysis, /About the prompt: There are 3 scenes/);
    });

    it('when the video is detailed in one shot and flat in another, then the detailed shot gets a sharpest frame with a high score', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const file = await shotsVideo('bars-flat', [
        { source: 'smptebars', seconds: 2 },
        { source: 'color=c=yellow', seconds: 2 },
      ]);
      const x = (await analyse(u, await upload(u.secret, file), 'Suggest a thumbnail')).extraction;
      assertWellFormed(x);
      const sharp = x.frames.filter((f) => f.reason === 'sharpest');
      assert.equal(sharp.length, 1, JSON.stringify(x.frames));
      assert.ok(sharp[0].timeSeconds > 0 && sharp[0].timeSeconds < 2 + TOLERANCE);
      assert.ok((sharp[0].score ?? 0) > 0.5);
      assert.ok(x.frames.some((f) => f.reason === 'representative' && f.timeSeconds > 2));
      assert.match(x.analysis, /Suggested thumbnail: \d+\.\d\d s \(sharpest/);
    });

    it('when the video has no audio and the prompt asks about it, then the answer says there is no audio track', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const x = (await analyse(u, await upload(u.secret, rgbSilent), 'Is there any sound?')).extraction;
      assert.match(x.analysis, /no audio track/);
      assert.match(x.analysis, /About the prompt: The video has no audio track\./);
    });

    it('when the prompt asks what it cannot measure, then the analysis says it cannot know', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const x = (await analyse(u, await upload(u.secret, rgbSilent), 'Who is the main character?')).extraction;
      assert.match(x.analysis, /cannot answer "Who is the main character\?"/);
    });

    it('when analysed, then the conservative maximum was reserved and the measured usage (less) charged once', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const r = await analyse(u, await upload(u.secret, rgbAv));
      const rows = await reservations(u.accountId);
      assert.equal(rows.length, 1);
      const rsv = rows[0];
      assert.equal(rsv.ref, r.id);
      assert.equal(rsv.purpose, 'llm');
      assert.equal(rsv.hold_allowance + rsv.hold_paid, RESERVED);
      assert.equal(rsv.state, 'settled');
      // 24 frames × 258 + 6 s × 32 + 64 + output tokens ≈ 6.8k tokens: 2 or 3 Gems at 0.25 / 1 per thousand.
      assert.ok(rsv.charged >= 2 && rsv.charged <= 3, `charged ${rsv.charged}`);
      assert.equal(rsv.charged + rsv.released, RESERVED);
      const sum = await summary(u);
      assert.equal(sum.llmAllowanceUsed, rsv.charged);
      assert.equal(sum.outstandingReservations.count, 0);
    });
  });

  describe('replay', () => {
    it('when the same identity is sent again, then the saved body returns with no new analysis and no second charge', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const assetId = await upload(u.secret, rgbAv);
      const idemKey = newKey('replay');
      const first = await analyse(u, assetId, 'colours?', idemKey);
      const before = await summary(u);
      const again = await post(u.secret, idemKey, { model: MODEL, videoAssetId: assetId, prompt: 'colours?' });
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), first);
      assert.deepEqual(await summary(u), before);
      assert.equal((await reservations(u.accountId)).length, 1);
    });

    it('when an absent prompt and an empty prompt are sent with one key, then they are the same identity', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const assetId = await upload(u.secret, rgbSilent);
      const idemKey = newKey('default');
      const first = await analyse(u, assetId, undefined, idemKey);
      const again = await analyse(u, assetId, '', idemKey);
      assert.deepEqual(again, first);
    });

    it('when the key is reused with a different body, then 409 IDEMPOTENCY_CONFLICT', async () => {
      const assetId = await upload(user.secret, rgbSilent);
      const idemKey = newKey('conflict');
      await analyse(user, assetId, 'one', idemKey);
      const res = await post(user.secret, idemKey, { model: MODEL, videoAssetId: assetId, prompt: 'two' });
      await expectError(res, 409, 'IDEMPOTENCY_CONFLICT');
      assert.equal(res.headers.get('x-should-retry'), 'false');
    });

    it('when 100 requests race with one identity, then one reservation and every answer is the result or REQUEST_UNCERTAIN', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const assetId = await upload(u.secret, rgbAv);
      const result = await assertOneIdentityRace(s.db, {
        url: s.url,
        path: PATH,
        key: u.secret,
        idemKey: newKey('race'),
        body: { model: MODEL, videoAssetId: assetId },
        accountId: u.accountId,
        successStatuses: [200],
      });
      const ids = new Set(result.bodies.filter((b) => b.status === 200).map((b) => (b.body as Extraction).id));
      assert.ok(ids.size <= 1, 'every success is the same extraction');
    });
  });

  describe('requests the schema rejects', () => {
    let assetId: string;
    before(async () => {
      assetId = await upload(user.secret, rgbSilent);
    });

    it('when the model is not the analysis model, then 422 MODEL_UNAVAILABLE', async () => {
      await expectError(await post(user.secret, newKey(), { model: 'gemforge-text-1', videoAssetId: assetId }), 422, 'MODEL_UNAVAILABLE');
    });

    it('when the prompt is longer than 2,000 characters, then 422 INVALID_REQUEST (2,000 passes)', async () => {
      await expectError(await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, prompt: 'p'.repeat(2001) }), 422, 'INVALID_REQUEST');
      assert.equal((await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, prompt: 'p'.repeat(2000) })).status, 200);
    });

    it('when the body is larger than 16,000 bytes, then 413', async () => {
      const res = await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, prompt: 'p'.repeat(1000), pad: 'x'.repeat(16_000) });
      await expectError(res, 413, undefined);
    });

    it('when the body has an unknown field, a bad maxGems or no Idempotency-Key, then 422 INVALID_REQUEST', async () => {
      await expectError(await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, frames: 3 }), 422, 'INVALID_REQUEST');
      await expectError(await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, maxGems: 1_000_001 }), 422, 'INVALID_REQUEST');
      await expectError(await post(user.secret, newKey(), { model: MODEL, videoAssetId: assetId, maxGems: -1 }), 422, 'INVALID_REQUEST');
      await expectError(await post(user.secret, newKey(), { model: MODEL }), 422, 'INVALID_REQUEST');
      await expectError(await post(user.secret, undefined, { model: MODEL, videoAssetId: assetId }), 422, 'INVALID_REQUEST');
    });

    it('when the key lacks the generate scope, then 403 INSUFFICIENT_SCOPE', async () => {
      const { secret } = await s.key(user.accountId, { scopes: ['read'] });
      await expectError(await post(secret, newKey(), { model: MODEL, videoAssetId: assetId }), 403, 'INSUFFICIENT_SCOPE');
    });
  });

  describe('references and limits', () => {
    it('when the asset is unknown, another account’s or an image, then 422 INVALID_REFERENCE and nothing is reserved', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const other = await s.user({ llmAllowance: 1000 });
      const theirs = await upload(other.secret, rgbSilent);
      const picture = await upload(u.secret, await image('png'), 'image/png');
      for (const id of ['asset_000000000000000000000000', theirs, picture]) {
        const message = await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 422, 'INVALID_REFERENCE');
        assert.match(message, /video asset/);
      }
      assert.equal((await reservations(u.accountId)).length, 0);
    });

    it('when the asset is not ready, then 409 REFERENCES_PROCESSING', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, rgbSilent);
      await s.db('assets').where({ id }).update({ state: 'processing' });
      await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 409, 'REFERENCES_PROCESSING');
      assert.equal((await reservations(u.accountId)).length, 0);
    });

    it('when the video lasts 120 s or more, then 422 INVALID_REQUEST naming the duration limit and the actual length', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, await longTinyVideo(121));
      const message = await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 422, 'INVALID_REQUEST');
      assert.match(message, /duration limit/);
      assert.match(message, /lasts 121 seconds/);
      assert.equal((await reservations(u.accountId)).length, 0);
    });

    it('when the video is 25 MiB or more (but uploadable), then 422 INVALID_REQUEST naming the size limit and the actual size', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const file = await bigVideo();
      const size = fs.statSync(file).size;
      assert.ok(size > 25 * 1024 * 1024 && size <= 30 * 1024 * 1024, `fixture size ${size}`);
      const id = await upload(u.secret, file);
      const message = await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 422, 'INVALID_REQUEST');
      assert.match(message, /size limit/);
      assert.match(message, new RegExp(`${size} bytes`));
      assert.equal((await reservations(u.accountId)).length, 0);
    });
  });

  describe('money', () => {
    it('when maxGems is below the conservative maximum, then 409 PRICE_CHANGED and nothing is reserved; at the maximum it runs', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, rgbSilent);
      const res = await post(u.secret, newKey(), { model: MODEL, videoAssetId: id, maxGems: RESERVED - 1 });
      const message = await expectError(res, 409, 'PRICE_CHANGED');
      assert.match(message, new RegExp(`${RESERVED} Gems`));
      assert.equal(res.headers.get('x-should-retry'), 'false');
      assert.equal((await reservations(u.accountId)).length, 0);
      assert.equal((await post(u.secret, newKey(), { model: MODEL, videoAssetId: id, maxGems: RESERVED })).status, 200);
    });

    it('when the LLM allowance cannot cover the reservation and paid Gems are not consented, then 402 LLM_QUOTA_EXHAUSTED', async () => {
      const u = await s.user({ llmAllowance: RESERVED - 1, gems: 1000 });
      const id = await upload(u.secret, rgbSilent);
      await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 402, 'LLM_QUOTA_EXHAUSTED');
      assert.equal((await reservations(u.accountId)).length, 0);
    });

    it('when the allowance is short but paid Gems are consented, then it runs and the charge comes from the allowance first', async () => {
      const u = await s.user({ llmAllowance: 1, gems: 1000, paidConsent: true });
      const id = await upload(u.secret, rgbSilent);
      const r = await analyse(u, id);
      const [rsv] = await reservations(u.accountId);
      assert.equal(rsv.ref, r.id);
      assert.equal(rsv.hold_allowance, 1);
      assert.equal(rsv.hold_paid, RESERVED - 1);
      const sum = await summary(u);
      assert.equal(sum.llmAllowanceUsed, 1);
      assert.equal(sum.balance, 1000 - (rsv.charged - 1));
    });

    it('when the key cap cannot cover the reservation, then 402 API_KEY_LIMIT', async () => {
      const u = await s.user({ llmAllowance: 1000, cap: RESERVED - 1 });
      const id = await upload(u.secret, rgbSilent);
      await expectError(await post(u.secret, newKey(), { model: MODEL, videoAssetId: id }), 402, 'API_KEY_LIMIT');
    });
  });

  describe('scenario triggers', () => {
    it('when the prompt has [[scenario:analysis-failed]], then 409 ANALYSIS_FAILED is billed and its replay answers the same with no new charge', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, rgbAv);
      const idemKey = newKey('failed');
      const body = { model: MODEL, videoAssetId: id, prompt: 'Describe it [[scenario:analysis-failed]]' };
      const first = await post(u.secret, idemKey, body);
      assert.equal(first.headers.get('x-should-retry'), 'false');
      const message = await expectError(first, 409, 'ANALYSIS_FAILED');
      const [rsv] = await reservations(u.accountId);
      assert.equal(rsv.state, 'settled');
      assert.ok(rsv.charged > 0 && rsv.charged < RESERVED, `billed ${rsv.charged}`);
      const before = await summary(u);
      assert.equal(before.llmAllowanceUsed, rsv.charged);

      const replay = await post(u.secret, idemKey, body);
      assert.equal(replay.headers.get('x-should-retry'), 'false');
      assert.equal(await expectError(replay, 409, 'ANALYSIS_FAILED'), message);
      assert.deepEqual(await summary(u), before);
      assert.equal((await reservations(u.accountId)).length, 1);
    });

    it('when the prompt has [[scenario:uncertain]], then 409 REQUEST_UNCERTAIN, the reservation stays held and every replay answers the same', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, rgbSilent);
      const idemKey = newKey('uncertain');
      const body = { model: MODEL, videoAssetId: id, prompt: '[[scenario:uncertain]]' };
      await expectError(await post(u.secret, idemKey, body), 409, 'REQUEST_UNCERTAIN');
      await expectError(await post(u.secret, idemKey, body), 409, 'REQUEST_UNCERTAIN');
      const rows = await reservations(u.accountId);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].state, 'held');
      assert.equal((await summary(u)).outstandingReservations.gems, RESERVED);
    });

    it('when the prompt has [[scenario:provider-unavailable]], then 503 before anything is claimed, and the same identity may be retried', async () => {
      const u = await s.user({ llmAllowance: 1000 });
      const id = await upload(u.secret, rgbSilent);
      const idemKey = newKey('unavailable');
      const body = { model: MODEL, videoAssetId: id, prompt: '[[scenario:provider-unavailable]]' };
      await expectError(await post(u.secret, idemKey, body), 503, 'PROVIDER_UNAVAILABLE');
      await expectError(await post(u.secret, idemKey, body), 503, 'PROVIDER_UNAVAILABLE');
      assert.equal((await reservations(u.accountId)).length, 0);
      assert.equal((await s.db('idempotency_records').where({ key_id: u.keyId })).length, 0);
    });
  });
});
