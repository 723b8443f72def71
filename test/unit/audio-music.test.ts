/** The music generator's decisions and the measurements it is judged by (tempo, exact length, determinism). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MUSIC_SAMPLE_RATE, planMusic, renderMusic, type MusicRequest } from '../../server/providers/audio/music.ts';
import { estimateTempo } from '../../server/providers/audio/analysis.ts';
import { musicPrice, speechPrice } from '../../server/domain/media-audio.ts';

const base: MusicRequest = {
  prompt: 'a song about trains',
  musicMode: 'simple',
  instrumental: 'on',
  style: null,
  title: null,
  negativeTags: null,
  vocalGender: 'auto',
  durationSeconds: 30,
  coverAudio: null,
  seed: null,
};

describe('music generator', () => {
  it('when a cover has a tempo from 70 to 160 BPM, then the music is measured at that tempo (±3 %)', () => {
    for (const bpm of [70, 96, 128, 160]) {
      const pcm = renderMusic(planMusic(base, { tempo: bpm, pitchClass: 0 }), 30, 1);
      const measured = estimateTempo(pcm)!;
      assert.ok(Math.abs(measured - bpm) < bpm * 0.03, `${bpm} BPM measured ${measured}`);
    }
  });

  it('when a cover is faster than 180 BPM, then it is followed at half time', () => {
    assert.equal(planMusic(base, { tempo: 200, pitchClass: null }).bpm, 100);
  });

  it('when any duration is asked for, then the PCM is exactly that many seconds', () => {
    for (const seconds of [30, 60, 240]) {
      assert.equal(renderMusic(planMusic(base, null), seconds, 1).samples.length, seconds * MUSIC_SAMPLE_RATE);
    }
  });

  it('when the request repeats, then the music repeats; when the prompt changes, then the plan and sound change', () => {
    const a = renderMusic(planMusic(base, null), 30, 1);
    const b = renderMusic(planMusic(base, null), 30, 1);
    assert.deepEqual(a.samples, b.samples);
    const other = planMusic({ ...base, prompt: 'a completely different idea' }, null);
    assert.notDeepEqual(other, planMusic(base, null));
  });

  it('when words ask for slow sad music or fast dance music, then tempo and mode follow', () => {
    const sad = planMusic({ ...base, prompt: 'a slow sad ballad in the rain' }, null);
    const dance = planMusic({ ...base, prompt: 'an upbeat dance party track' }, null);
    assert.ok(sad.bpm < 90 && sad.minor, JSON.stringify(sad));
    assert.ok(dance.bpm >= 118 && !dance.minor, JSON.stringify(dance));
  });

  it('when negativeTags exclude drums or vocals, then they are left out; vocalGender sets the register', () => {
    assert.equal(planMusic({ ...base, negativeTags: 'drums' }, null).drums, 'none');
    assert.equal(planMusic({ ...base, instrumental: 'off', negativeTags: 'vocals' }, null).vocal, null);
    const f = planMusic({ ...base, instrumental: 'off', vocalGender: 'f' }, null).vocal!;
    const m = planMusic({ ...base, instrumental: 'off', vocalGender: 'm' }, null).vocal!;
    assert.equal(f.low - m.low, 12, 'the female register is an octave above the male');
    assert.equal(planMusic(base, null).vocal, null, 'instrumental on: no vocal');
  });

  it('when prices are computed, then speech is max(minimum, ceil(chars/1000 × rate)) and music ceil(s/30) × rate', () => {
    const speech = { perThousandChars: 3, minimum: 1 };
    assert.deepEqual(
      [1, 333, 334, 1000, 1001, 2000].map((c) => speechPrice(c, speech)),
      [1, 1, 2, 3, 4, 6],
    );
    assert.deepEqual(
      [30, 60, 120, 180, 240].map((s) => musicPrice(s, { perThirtySeconds: 2 })),
      [2, 4, 8, 12, 16],
    );
  });
});
