/**
 * The extraction use case with stand-in providers (no server): missing usage
 * keeps the reservation, a refused analysis releases it, an unknown outcome
 * holds it, and a provider's malformed answer is a billed ANALYSIS_FAILED.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { extractVideo, type ExtractDeps } from '../../server/domain/extract.ts';
import { loadCatalog } from '../../server/domain/catalog.ts';
import { systemClock } from '../../server/domain/clock.ts';
import { newId } from '../../server/domain/ids.ts';
import { createLogger } from '../../server/logger.ts';
import { answerOf } from '../../server/http/error-map.ts';
import { localBlobs, putBlobFromFile } from '../../server/storage/blobs.ts';
import { insertAsset } from '../../server/storage/assets.ts';
import { findAccount, findKey } from '../../server/storage/accounts.ts';
import type { Principal } from '../../server/domain/accounts.ts';
import { AnalysisError, type AnalysisProvider, type AnalysisResult } from '../../server/providers/analysis/index.ts';
import type { ReservationRow } from '../../server/storage/ledger.ts';
import { makeAccountWithKey, openTestDb, type TestDb } from '../helpers/db.ts';

const catalog = loadCatalog(path.join(import.meta.dirname, '../../server/catalog/models.yaml'));
const MODEL = 'gemforge-video-analysis-1' as const;
const GOOD = JSON.stringify({
  analysis: 'ok',
  durationSeconds: 6,
  frames: [{ timeSeconds: 0, reason: 'scene_start', score: 1 }],
  segments: [{ startSeconds: 0, endSeconds: 6, description: 'all' }],
});

class Stub implements AnalysisProvider {
  readonly name = 'stub';
  calls = 0;
  constructor(private readonly answer: () => Promise<AnalysisResult>) {}
  analyze(): Promise<AnalysisResult> {
    this.calls++;
    return this.answer();
  }
}

describe('extraction use case', () => {
  let t: TestDb;
  let seq = 0;
  before(async () => {
    t = await openTestDb();
  });
  after(() => t.close());

  async function setup(provider: AnalysisProvider) {
    const { accountId, keyId } = await makeAccountWithKey(t.db, systemClock, { llmAllowance: 1000 });
    const principal: Principal = { account: (await findAccount(t.db, accountId))!, key: (await findKey(t.db, keyId))! };
    const file = path.join(t.dir, `video-${++seq}.bin`);
    fs.writeFileSync(file, `not really a video ${seq}`);
    const { sha256, size } = await putBlobFromFile(localBlobs(t.dir), file);
    const assetId = newId('asset');
    await insertAsset(t.db, {
      id: assetId,
      account_id: accountId,
      kind: 'video',
      mime_type: 'video/mp4',
      state: 'ready',
      size_bytes: size,
      blob_sha256: sha256,
      filename: null,
      width: 320,
      height: 180,
      duration_seconds: 6,
      video_codec: 'h264',
      audio_codec: null,
      has_audio: false,
      origin: 'upload',
      task_id: null,
      expires_at: null,
      deleted_at: null,
      created_at: new Date().toISOString(),
    });
    const deps: ExtractDeps = {
      db: t.db,
      clock: systemClock,
      catalog,
      logger: createLogger('silent'),
      provider,
      blobs: localBlobs(t.dir),
      scenariosEnabled: true,
    };
    const run = (idemKey: string, prompt = '') => extractVideo(deps, principal, idemKey, { model: MODEL, videoAssetId: assetId, prompt });
    const reservations = async () => (await t.db('reservations').where({ account_id: accountId })) as ReservationRow[];
    return { run, reservations };
  }

  const rejectsWith = async (p: Promise<unknown>, status: number, code: string) => {
    await assert.rejects(p, (e: unknown) => answerOf(e)?.status === status && answerOf(e)?.code === code);
  };

  it('when the provider reports no usage, then the whole conservative reservation is charged', async () => {
    const { run, reservations } = await setup(new Stub(async () => ({ output: GOOD, usage: undefined })));
    const r = await run('k1');
    assert.equal(r.extraction.analysis, 'ok');
    const [rsv] = await reservations();
    assert.equal(rsv.state, 'settled');
    assert.equal(rsv.charged, 74);
    assert.equal(rsv.released, 0);
  });

  it('when the provider reports usage above the reservation, then the charge is clamped to it', async () => {
    const { run, reservations } = await setup(new Stub(async () => ({ output: GOOD, usage: { inputTokens: 10_000_000, outputTokens: 10_000_000 } })));
    await run('k1');
    assert.equal((await reservations())[0].charged, 74);
  });

  it('when the provider answers malformed text with usage, then 409 ANALYSIS_FAILED is billed and replayed without calling it again', async () => {
    const stub = new Stub(async () => ({ output: 'Sure! Here is the analysis: {', usage: { inputTokens: 4000, outputTokens: 1000 } }));
    const { run, reservations } = await setup(stub);
    await rejectsWith(run('k1'), 409, 'ANALYSIS_FAILED');
    await rejectsWith(run('k1'), 409, 'ANALYSIS_FAILED');
    assert.equal(stub.calls, 1);
    const rows = await reservations();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].charged, 2); // ceil((4000 × 0.25 + 1000 × 1) / 1000)
  });

  it('when the provider refuses, then nothing is charged, 502 PROVIDER_ERROR, and a replay answers REQUEST_FAILED', async () => {
    const stub = new Stub(async () => {
      throw new AnalysisError('refused', 'The video could not be decoded.');
    });
    const { run, reservations } = await setup(stub);
    await rejectsWith(run('k1'), 502, 'PROVIDER_ERROR');
    await rejectsWith(run('k1'), 409, 'REQUEST_FAILED');
    assert.equal(stub.calls, 1);
    const [rsv] = await reservations();
    assert.equal(rsv.state, 'released');
    assert.equal(rsv.charged, 0);
  });

  it('when the provider fails in an unknown way, then the reservation stays held and replays answer REQUEST_UNCERTAIN', async () => {
    const stub = new Stub(async () => {
      throw new Error('connection reset');
    });
    const { run, reservations } = await setup(stub);
    await rejectsWith(run('k1'), 409, 'REQUEST_UNCERTAIN');
    await rejectsWith(run('k1'), 409, 'REQUEST_UNCERTAIN');
    assert.equal(stub.calls, 1);
    assert.equal((await reservations())[0].state, 'held');
  });

  it('when the provider’s pre-flight refuses (a circuit breaker), then 503 PROVIDER_UNAVAILABLE before anything is claimed and it is never asked to analyse', async () => {
    const stub = new Stub(async () => ({ output: GOOD, usage: undefined }));
    const breaker: AnalysisProvider = { name: 'breaker', admit: () => false, analyze: () => stub.analyze() };
    const { run, reservations } = await setup(breaker);
    await rejectsWith(run('k1', 'a plain prompt'), 503, 'PROVIDER_UNAVAILABLE');
    await rejectsWith(run('k1', 'a plain prompt'), 503, 'PROVIDER_UNAVAILABLE');
    assert.equal(stub.calls, 0);
    assert.deepEqual(await reservations(), []);
  });

  it('when scenario markers are in the prompt, then the provider sees the prompt without them', async () => {
    let seen = '';
    const provider: AnalysisProvider = {
      name: 'spy',
      async analyze(req) {
        seen = req.prompt;
        return { output: GOOD, usage: { inputTokens: 1, outputTokens: 1 } };
      },
    };
    const { run } = await setup(provider);
    await run('k1', 'count the scenes [[scenario:unknown-marker]] please');
    assert.equal(seen, 'count the scenes please');
  });
});
