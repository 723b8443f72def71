/**
 * Audio end to end at the real server: speech, voice_clone and music are
 * submitted, polled and downloaded, and the real bytes are measured (ffprobe
 * for duration and codec, decoded PCM for level, pitch and tempo).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, download, newKey, submit, waitForTask, type TaskBody } from './helpers/tasks.ts';
import { assertOneIdentityRace } from './helpers/exactly-once.ts';
import { FFMPEG, FFPROBE, image, speech as speechFixture } from './helpers/media.ts';
import { uploadAsset, uploadVoice } from './helpers/uploads.ts';
import { runTool } from '../server/media/run.ts';
import { probeAv } from '../server/media/probe.ts';
import { decodePcm } from '../server/media/pcm.ts';
import { estimateTempo, medianPitchHz } from '../server/providers/audio/analysis.ts';
import { rmsDb } from '../server/providers/audio/wav.ts';
import { findVoice } from '../server/storage/voices.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { fingerprint } from '../server/domain/idempotency.ts';

const AUDIO = '/api/generate/audio';
const SPEECH = 'gemforge-speech-1';
const MUSIC = 'gemforge-music-1';
/** Public voices (server/catalog/voices.yaml): Sawyer is low (97 Hz), Brooke high (217 Hz). */
const SAWYER = 'voice_216a51c833b48d5464b520f3';
const BROOKE = 'voice_72f75e56f33b8e9d6d8f4475';
const SENTENCE = 'The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet forest.';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-audio-test-'));
process.once('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

interface Measured {
  task: TaskBody;
  codec: string | null;
  durationSeconds: number;
  rms: number;
  pitchHz: number | null;
  tempo: number | null;
  mimeType: string;
}

describe('audio generation', () => {
  let s: TestServer;
  let user: { accountId: string; keyId: string; secret: string };
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    user = await s.user({ gems: 100_000 });
  });
  after(() => s.close());

  /** Submit → poll → download → measure the real bytes. */
  async function generate(body: Record<string, unknown>, what: { pitch?: boolean; tempo?: boolean } = {}, key = user.secret): Promise<Measured> {
    const sub = await submit(s, key, AUDIO, body);
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const task = await waitForTask(s, key, sub.body.task.id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assertSettled(task);
    const asset = task.outputs[0]!.asset!;
    const file = await download(asset.url);
    assert.equal(file.status, 200);
    assert.equal(file.type, asset.mimeType);
    const out = path.join(tmp, `${task.id}.wav`);
    fs.writeFileSync(out, file.bytes);
    const probe = await probeAv(FFPROBE, out);
    const pcm = await decodePcm(FFMPEG, out, { sampleRate: 16_000 });
    return {
      task,
      codec: probe.audio?.codec ?? null,
      durationSeconds: probe.durationSeconds ?? NaN,
      rms: rmsDb(pcm.samples),
      pitchHz: what.pitch ? medianPitchHz(pcm) : null,
      tempo: what.tempo ? estimateTempo(pcm) : null,
      mimeType: asset.mimeType,
    };
  }

  const speak = (prompt: string, parameters: Record<string, unknown>, operation = 'speech') => ({ model: SPEECH, operation, prompt, parameters });

  const voice = (file: string, key = user.secret) => uploadVoice(s, key, file, 20);
  const asset = (file: string, type: string) => uploadAsset(s, user.secret, file, type);

  /** A click track (a short 1 kHz blip on every beat) as WAV. */
  async function clickTrack(bpm: number): Promise<string> {
    const file = path.join(tmp, `click-${bpm}.wav`);
    const period = 60 / bpm;
    const expr = `if(lt(mod(t\\,${period.toFixed(6)})\\,0.03)\\,0.8*sin(2*PI*1000*t)\\,0)`;
    await runTool(FFMPEG, ['-v', 'error', '-nostdin', '-y', '-f', 'lavfi', '-i', `aevalsrc=${expr}:s=22050:d=20`, '-ac', '1', '-c:a', 'pcm_s16le', file]);
    return file;
  }

  // ------------------------------------------------------------ speech

  it('when the speech controls are left out or sent at their defaults, then it is one identity, fingerprinted as the body without them (as before the contract stated the defaults); another value conflicts', async () => {
    const body = speak('Hello there.', { voiceProfileId: SAWYER });
    const first = await submit(s, user.secret, AUDIO, body);
    assert.equal(first.status, 202, JSON.stringify(first.body));
    const explicit = await submit(
      s,
      user.secret,
      AUDIO,
      speak('Hello there.', { voiceProfileId: SAWYER, speed: 1, volume: 0, temperature: 0.7 }),
      first.idemKey,
    );
    assert.deepEqual([explicit.status, explicit.body.task.id], [200, first.body.task.id]);
    const other = await submit(s, user.secret, AUDIO, speak('Hello there.', { voiceProfileId: SAWYER, speed: 1.5 }), first.idemKey);
    assert.deepEqual([other.status, other.body.error.code], [409, 'IDEMPOTENCY_CONFLICT']);
    const record = await s.db('idempotency_records').where({ key_id: user.keyId, idem_key: first.idemKey }).first();
    assert.equal(record.fingerprint, fingerprint(body), 'the fingerprint an identity claimed before the defaults were stated has');
  });

  it('when a public voice speaks a sentence, then a real WAV of intelligible-length speech at the voice’s pitch is charged exactly its price', async () => {
    const m = await generate(speak(SENTENCE, { voiceProfileId: BROOKE }), { pitch: true });
    assert.equal(m.mimeType, 'audio/wav');
    assert.equal(m.codec, 'pcm_s16le');
    assert.ok(m.durationSeconds > 3 && m.durationSeconds < 12, `duration ${m.durationSeconds}`);
    assert.ok(m.rms > -40, `not silent: ${m.rms.toFixed(1)} dBFS`);
    assert.ok(m.pitchHz! > 217 * 0.85 && m.pitchHz! < 217 * 1.15, `Brooke's pitch ≈ 217 Hz, measured ${m.pitchHz}`);
    assert.equal(m.task.quotedGems, 1, 'under 1,000 characters: the minimum');
    assert.equal(m.task.chargedGems, 1);
    assert.equal(m.task.releasedGems, 0);
  });

  it('when the text is longer, then the speech is longer; when the speed is 2, then it is about half as long as at speed 1', async () => {
    const short = await generate(speak('Hello there, my friend.', { voiceProfileId: SAWYER }));
    const long = await generate(speak(`${SENTENCE} ${SENTENCE} ${SENTENCE}`, { voiceProfileId: SAWYER }));
    assert.ok(long.durationSeconds > short.durationSeconds * 3, `${long.durationSeconds} vs ${short.durationSeconds}`);
    const fast = await generate(speak(SENTENCE, { voiceProfileId: SAWYER, speed: 2 }));
    const normal = await generate(speak(SENTENCE, { voiceProfileId: SAWYER, speed: 1 }));
    const slow = await generate(speak(SENTENCE, { voiceProfileId: SAWYER, speed: 0.5 }));
    assert.ok(fast.durationSeconds < normal.durationSeconds * 0.65, `speed 2: ${fast.durationSeconds} vs ${normal.durationSeconds}`);
    assert.ok(slow.durationSeconds > normal.durationSeconds * 1.5, `speed 0.5: ${slow.durationSeconds} vs ${normal.durationSeconds}`);
  });

  it('when the volume is +6 dB, then the speech is about 12 dB louder than at -6 dB', async () => {
    const loud = await generate(speak(SENTENCE, { voiceProfileId: SAWYER, volume: 6 }));
    const quiet = await generate(speak(SENTENCE, { voiceProfileId: SAWYER, volume: -6 }));
    assert.ok(Math.abs(loud.rms - quiet.rms - 12) < 1.5, `${loud.rms.toFixed(1)} vs ${quiet.rms.toFixed(1)} dBFS`);
    assert.ok(quiet.rms > -50, 'even -6 dB is clearly audible');
  });

  it('when two public voices differ in pitch, then the measured pitch of their speech differs the same way', async () => {
    const low = await generate(speak(SENTENCE, { voiceProfileId: SAWYER }), { pitch: true });
    const high = await generate(speak(SENTENCE, { voiceProfileId: BROOKE }), { pitch: true });
    assert.ok(low.pitchHz! > 97 * 0.85 && low.pitchHz! < 97 * 1.15, `Sawyer ≈ 97 Hz, measured ${low.pitchHz}`);
    assert.ok(high.pitchHz! > low.pitchHz! * 1.6, `${high.pitchHz} vs ${low.pitchHz}`);
  });

  it('when the temperature changes, then the prosody changes deterministically; the same request repeats exactly', async () => {
    const body = (temperature: number) => speak(SENTENCE, { voiceProfileId: SAWYER, temperature, seed: 3 });
    const a = await generate(body(0.9));
    const b = await generate(body(0.9));
    const c = await generate(body(0));
    const bytes = async (m: Measured) => (await download((await waitForTask(s, user.secret, m.task.id)).outputs[0]!.asset!.url)).bytes;
    assert.deepEqual(await bytes(a), await bytes(b));
    assert.notDeepEqual(await bytes(a), await bytes(c));
  });

  it('when a high- and a low-pitched reference are cloned, then the clones follow their pitch', async () => {
    const lowId = await voice(await speechFixture(20, { pitch: 10 }));
    const highId = await voice(await speechFixture(20, { pitch: 90 }));
    const refPitch = async (id: string) => (JSON.parse((await findVoice(s.db, id))!.traits) as { medianPitchHz: number }).medianPitchHz;
    const [refLow, refHigh] = [await refPitch(lowId), await refPitch(highId)];
    assert.ok(refHigh > refLow * 1.4, `fixtures differ: ${refHigh} vs ${refLow}`);
    const low = await generate(speak('This is my cloned voice reading a short test sentence.', { voiceProfileId: lowId }, 'voice_clone'), { pitch: true });
    const high = await generate(speak('This is my cloned voice reading a short test sentence.', { voiceProfileId: highId }, 'voice_clone'), { pitch: true });
    assert.ok(high.pitchHz! > low.pitchHz! * 1.3, `clone pitch ${high.pitchHz} vs ${low.pitchHz}`);
    assert.ok(Math.abs(Math.log(low.pitchHz! / refLow)) < Math.log(1.2), `low clone ${low.pitchHz} follows ${refLow}`);
    assert.ok(Math.abs(Math.log(high.pitchHz! / refHigh)) < Math.log(1.2), `high clone ${high.pitchHz} follows ${refHigh}`);
    // The caller's own uploaded voice also works for plain speech.
    await generate(speak('Plain speech in my own voice.', { voiceProfileId: lowId }));
  });

  it('when the text has 1,001 or 2,000 characters, then the quote is ceil(chars / 1,000 × 3) and exactly that is charged', async () => {
    for (const [chars, gems] of [
      [1001, 4],
      [2000, 6],
    ] as const) {
      const prompt = 'Speak this clearly. '.repeat(200).slice(0, chars - 1) + '.';
      assert.equal(prompt.length, chars);
      const sub = await submit(s, user.secret, AUDIO, speak(prompt, { voiceProfileId: SAWYER, speed: 2 }));
      assert.equal(sub.body.task.quotedGems, gems, `${chars} characters`);
      const task = await waitForTask(s, user.secret, sub.body.task.id, 120_000);
      assert.equal(task.status, 'succeeded');
      assert.equal(task.chargedGems, gems);
    }
  });

  it('when the text has astral characters (emoji), then each counts as one character against the 2,000 limit', async () => {
    const atLimit = await submit(s, user.secret, AUDIO, { ...speak('é'.repeat(1999) + '😀', { voiceProfileId: SAWYER }), maxGems: 0 });
    // PRICE_CHANGED comes after the length check: 2,000 characters passed it.
    assert.equal(atLimit.body.error?.code, 'PRICE_CHANGED', JSON.stringify(atLimit.body));
    const over = await submit(s, user.secret, AUDIO, { ...speak('😀'.repeat(2001), { voiceProfileId: SAWYER }), maxGems: 0 });
    assert.equal(over.status, 422);
    assert.match(over.body.error.message, /prompt .*(2000|2,000)/);
  });

  // ------------------------------------------------------------ music

  it('when 30 s of music is asked for, then a real 30 s WAV with a steady pulse is charged 2 Gems; duration off gives the model’s 30 s', async () => {
    const m = await generate(
      { model: MUSIC, operation: 'music', prompt: 'An upbeat synth-pop song about night trains', parameters: { duration: '30' } },
      { tempo: true },
    );
    assert.equal(m.codec, 'pcm_s16le');
    assert.ok(Math.abs(m.durationSeconds - 30) <= 0.5, `duration ${m.durationSeconds}`);
    assert.ok(m.rms > -30, `music is loud enough: ${m.rms.toFixed(1)} dBFS`);
    assert.ok(m.tempo !== null && m.tempo >= 60 && m.tempo <= 180, `a pulse: ${m.tempo}`);
    assert.equal(m.task.quotedGems, 2);
    assert.equal(m.task.chargedGems, 2);
    const auto = await generate({ model: MUSIC, operation: 'music', prompt: 'a calm piano piece', parameters: { duration: 'off' } });
    assert.ok(Math.abs(auto.durationSeconds - 30) <= 0.5, `autoDurationSeconds: ${auto.durationSeconds}`);
  });

  it('when 240 s of advanced-mode song with vocals is asked for, then it is 240 s long and costs 16 Gems', async () => {
    const m = await generate({
      model: MUSIC,
      operation: 'music',
      prompt: '[Verse]\nLanterns on the water, drifting out of town',
      parameters: {
        musicMode: 'advanced',
        style: 'lo-fi folk, fingerpicked guitar',
        title: 'Lanterns',
        instrumental: 'off',
        vocalGender: 'f',
        negativeTags: 'heavy drums',
        duration: '240',
      },
    });
    assert.ok(Math.abs(m.durationSeconds - 240) <= 0.5, `duration ${m.durationSeconds}`);
    assert.equal(m.task.chargedGems, 16);
  });

  it('when a fast and a slow click track are covered, then the covers’ estimated tempi follow them', async () => {
    const fast = await asset(await clickTrack(140), 'audio/wav');
    const slow = await asset(await clickTrack(80), 'audio/wav');
    const fastCover = await generate(
      { model: MUSIC, operation: 'music', prompt: 'a cover', parameters: { duration: '30', coverAudio: fast } },
      { tempo: true },
    );
    const slowCover = await generate(
      { model: MUSIC, operation: 'music', prompt: 'a cover', referenceAssetIds: [slow], parameters: { duration: '30' } },
      { tempo: true },
    );
    assert.ok(Math.abs(fastCover.tempo! - 140) < 140 * 0.04, `fast cover at ${fastCover.tempo} BPM`);
    assert.ok(Math.abs(slowCover.tempo! - 80) < 80 * 0.04, `slow cover at ${slowCover.tempo} BPM`);
  });

  // ------------------------------------------------------------ rejections

  it('when a rule of the audio operations is broken, then 422 names the parameter', async () => {
    const other = await s.user();
    const theirVoice = await voice(await speechFixture(20), other.secret);
    const mine = await asset(await clickTrack(100), 'audio/wav');
    const picture = await asset(await image('png'), 'image/png');
    const v = { voiceProfileId: SAWYER };
    const music = (parameters: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
      model: MUSIC,
      operation: 'music',
      prompt: 'a song',
      parameters,
      ...extra,
    });
    const cases: Array<[unknown, string, RegExp]> = [
      [{ model: MUSIC, operation: 'speech', prompt: 'hi', parameters: v }, 'MODEL_UNAVAILABLE', /gemforge-speech-1/],
      [{ model: SPEECH, operation: 'music', prompt: 'hi' }, 'MODEL_UNAVAILABLE', /gemforge-music-1/],
      [{ model: 'gemforge-image-1', operation: 'voice_clone', prompt: 'hi', parameters: v }, 'MODEL_UNAVAILABLE', /gemforge-speech-1/],
      [{ model: SPEECH, prompt: 'hi', parameters: v }, 'INVALID_REQUEST', /operation/],
      [{ model: SPEECH, operation: 'sing', prompt: 'hi', parameters: v }, 'INVALID_REQUEST', /operation/],
      [{ model: SPEECH, operation: 'speech', prompt: 'hi' }, 'INVALID_REQUEST', /parameters/],
      [speak('hi', {}), 'INVALID_REQUEST', /voiceProfileId/],
      [speak('hi', { voiceProfileId: 'voice_000000000000000000000000' }), 'INVALID_REFERENCE', /voiceProfileId/],
      [speak('hi', { voiceProfileId: theirVoice }), 'INVALID_REFERENCE', /voiceProfileId/],
      [speak('hi', { voiceProfileId: SAWYER }, 'voice_clone'), 'INVALID_REFERENCE', /public voice.*voice_clone/],
      [speak('hi', { voiceProfileId: theirVoice }, 'voice_clone'), 'INVALID_REFERENCE', /voiceProfileId/],
      [speak('x'.repeat(2001), v), 'INVALID_REQUEST', /prompt/],
      [speak('   ', v), 'INVALID_REQUEST', /prompt is empty/],
      [speak('hi', { ...v, speed: 2.5 }), 'INVALID_REQUEST', /speed/],
      [speak('hi', { ...v, speed: 0.4 }), 'INVALID_REQUEST', /speed/],
      [speak('hi', { ...v, volume: 7 }), 'INVALID_REQUEST', /volume/],
      [speak('hi', { ...v, volume: -6.5 }), 'INVALID_REQUEST', /volume/],
      [speak('hi', { ...v, temperature: 1.2 }), 'INVALID_REQUEST', /temperature/],
      [{ ...speak('hi', v), referenceAssetIds: [mine] }, 'INVALID_REQUEST', /referenceAssetIds must NOT have more than 0 items/],
      [speak('hi', { ...v, musicMode: 'simple' }), 'INVALID_REQUEST', /parameters\.musicMode is not accepted/],
      [speak('hi', { ...v, coverAudio: mine }), 'INVALID_REQUEST', /parameters\.coverAudio is not accepted/],
      [speak('hi', { ...v, provider: 'x' }), 'INVALID_REQUEST', /provider/],
      [music({ voiceProfileId: SAWYER }), 'INVALID_REQUEST', /parameters\.voiceProfileId is not accepted/],
      [music({ speed: 1.5 }), 'INVALID_REQUEST', /parameters\.speed is not accepted/],
      [music({ speed: 1 }), 'INVALID_REQUEST', /parameters\.speed is not accepted/],
      [music({ volume: 0 }), 'INVALID_REQUEST', /parameters\.volume is not accepted/],
      [music({ temperature: 0.2 }), 'INVALID_REQUEST', /parameters\.temperature is not accepted/],
      [music({ style: 'jazz' }), 'INVALID_REQUEST', /parameters\.style is not accepted/],
      [music({ musicMode: 'simple', title: 'Song' }), 'INVALID_REQUEST', /parameters\.title is not accepted/],
      [music({ musicMode: 'advanced', style: 's'.repeat(1001) }), 'INVALID_REQUEST', /style/],
      [music({ musicMode: 'advanced', title: 't'.repeat(81) }), 'INVALID_REQUEST', /title/],
      [music({ negativeTags: 'n'.repeat(201) }), 'INVALID_REQUEST', /negativeTags/],
      [music({ musicMode: 'pro' }), 'INVALID_REQUEST', /musicMode/],
      [music({ instrumental: 'yes' }), 'INVALID_REQUEST', /instrumental/],
      [music({ vocalGender: 'x' }), 'INVALID_REQUEST', /vocalGender/],
      [music({ duration: '45' }), 'INVALID_REQUEST', /duration/],
      [music({ duration: 30 }), 'INVALID_REQUEST', /duration/],
      [{ ...music({}), prompt: 'p'.repeat(5001) }, 'INVALID_REQUEST', /prompt/],
      [{ ...music({ musicMode: 'advanced' }), prompt: 'p'.repeat(3001) }, 'INVALID_REQUEST', /prompt \(advanced mode\).*3000/],
      [music({ coverAudio: mine }, { referenceAssetIds: [mine] }), 'INVALID_REQUEST', /coverAudio or a single referenceAssetIds entry, not both/],
      [music({}, { referenceAssetIds: [mine, mine] }), 'INVALID_REQUEST', /referenceAssetIds must NOT have more than 1 item/],
      [music({ coverAudio: picture }), 'INVALID_REFERENCE', /image/],
      [music({ coverAudio: 'asset_000000000000000000000000' }), 'INVALID_REFERENCE', /asset_0+/],
    ];
    for (const [body, code, message] of cases) {
      const res = await submit(s, user.secret, AUDIO, body);
      const label = JSON.stringify(body).slice(0, 140);
      assert.equal(res.status, 422, label);
      assert.equal(res.body.error.code, code, `${label}: ${res.body.error.message}`);
      assert.match(res.body.error.message, message, label);
    }
  });

  // ------------------------------------------------------------ money and scenarios

  it('when 100 simultaneous requests share one identity, then exactly one reservation and one task exist', async () => {
    const racer = await s.user({ gems: 1000 });
    const result = await assertOneIdentityRace(s.db, {
      url: s.url,
      path: AUDIO,
      key: racer.secret,
      idemKey: newKey('audio-race'),
      body: speak('Only once, please.', { voiceProfileId: SAWYER }),
      accountId: racer.accountId,
      n: 100,
    });
    const ids = new Set(result.bodies.filter((r) => r.status === 200 || r.status === 202).map((r) => (r.body as { task: { id: string } }).task.id));
    assert.equal(ids.size, 1);
    assert.equal(result.statuses[202], 1, 'one response created the task');
  });

  it('when the prompt carries [[scenario:fail]], then the task fails, nothing is charged and the quote is released', async () => {
    const sub = await submit(s, user.secret, AUDIO, { model: MUSIC, operation: 'music', prompt: 'a song [[scenario:fail]]', parameters: { duration: '60' } });
    assert.equal(sub.status, 202);
    assert.equal(sub.body.task.quotedGems, 4);
    const task = await waitForTask(s, user.secret, sub.body.task.id);
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'GENERATION_FAILED');
    assert.equal(task.chargedGems, 0);
    assert.equal(task.releasedGems, 4);
    assert.equal(task.outputs[0]!.asset, null);
  });

  it('when everything above settled, then ledger verify finds no problem', async () => {
    const report = await verifyLedger(s.db, [verifyTasks]);
    assert.deepEqual(report.problems, []);
  });
});
