/**
 * The embedded voice-activity check (server/media/vad.ts) over decoded PCM:
 * synthesised speech passes at several pitches and speeds; silence, white and
 * pink noise, steady tones and an amplitude-modulated tone fail with reasons.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decodePcm } from '../../server/media/pcm.ts';
import { analyzeSpeech } from '../../server/media/vad.ts';
import { transcriptionEndpoint } from '../../server/media/transcription.ts';
import { analyzeSpeechOffThread } from '../../server/media/vad-thread.ts';
import * as media from '../helpers/media.ts';

async function analyze(file: string) {
  const pcm = await decodePcm(media.FFMPEG, file, { sampleRate: 8000 });
  return analyzeSpeech(pcm.samples, pcm.sampleRate);
}

/** A tone whose loudness pulses 4 times a second, like syllables, but whose pitch never moves. */
async function pulsingTone(): Promise<string> {
  const { runTool } = await import('../../server/media/run.ts');
  const file = `${await media.tone(1)}.pulsing.wav`;
  await runTool(media.FFMPEG, ['-v', 'error', '-y', '-f', 'lavfi', '-i', "sine=frequency=150:duration=16,volume='0.5+0.5*sin(2*PI*4*t)':eval=frame", file]);
  return file;
}

describe('voice-activity check', () => {
  for (const [pitch, speed] of [
    [50, 150],
    [20, 120],
    [80, 180],
  ] as const) {
    it(`when synthesised speech (pitch ${pitch}, ${speed} wpm) is analysed, then it is speech with a plausible pitch and syllable rate`, async () => {
      const a = await analyze(await media.speech(16, { pitch, speed }));
      assert.equal(a.speech, true, a.reason);
      assert.ok(a.medianPitchHz! >= 70 && a.medianPitchHz! <= 400, String(a.medianPitchHz));
      assert.ok(a.syllablesPerSecond >= 1 && a.syllablesPerSecond <= 10, String(a.syllablesPerSecond));
      assert.ok(a.pitchIqrSemitones >= 0.5);
    });
  }

  it('when silence is analysed, then it is rejected as silent', async () => {
    const a = await analyze(await media.silence(16));
    assert.equal(a.speech, false);
    assert.match(a.reason!, /silent/);
  });

  for (const color of ['white', 'pink'] as const) {
    it(`when ${color} noise is analysed, then it is rejected as noise (no voiced frames)`, async () => {
      const a = await analyze(await media.noise(16, color));
      assert.equal(a.speech, false);
      assert.match(a.reason!, /noise/);
      assert.ok(a.voicedSeconds < 1.5);
    });
  }

  for (const hz of [100, 220, 380]) {
    it(`when a steady ${hz} Hz tone is analysed, then it is rejected as a steady tone`, async () => {
      const a = await analyze(await media.tone(16, hz));
      assert.equal(a.speech, false);
      assert.match(a.reason!, /steady tone/);
      assert.ok(Math.abs(a.medianPitchHz! - hz) < hz * 0.03, String(a.medianPitchHz));
    });
  }

  it('when a tone pulses like syllables but its pitch never moves, then it is still rejected', async () => {
    const a = await analyze(await pulsingTone());
    assert.equal(a.speech, false);
    assert.match(a.reason!, /steady tone/);
  });

  it('when a long recording is analysed off-thread, then the result is the same and the event loop keeps running', async () => {
    const sampleRate = 8000;
    const x = new Float32Array(sampleRate * 120);
    for (let i = 0; i < x.length; i++) x[i] = 0.3 * Math.sin((2 * Math.PI * 150 * i) / sampleRate);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const started = Date.now();
    const threaded = await analyzeSpeechOffThread(x, sampleRate);
    const elapsed = Date.now() - started;
    clearInterval(timer);
    assert.deepEqual(threaded, analyzeSpeech(x, sampleRate));
    assert.ok(ticks >= elapsed / 5 / 4, `event loop ticked ${ticks} times in ${elapsed} ms`);
  });

  it('when an empty signal is analysed, then it is silent, not an error', () => {
    const a = analyzeSpeech(new Float32Array(0), 8000);
    assert.equal(a.speech, false);
  });

  it('when the transcription URL is a base, a /v1 base or the endpoint, then requests go to /v1/audio/transcriptions', () => {
    assert.equal(transcriptionEndpoint('http://h:1'), 'http://h:1/v1/audio/transcriptions');
    assert.equal(transcriptionEndpoint('http://h:1/v1/'), 'http://h:1/v1/audio/transcriptions');
    assert.equal(transcriptionEndpoint('http://h:1/v1/audio/transcriptions'), 'http://h:1/v1/audio/transcriptions');
  });
});
