/**
 * The embedded music generator: real synthesized music rendered sample by
 * sample in TypeScript (no network, no model). From the prompt, style and title
 * it chooses deterministically a tempo, key, scale, chord progression and
 * instrument timbres; it writes a melody over the chords, a bass line, a pad and
 * a drum pattern, and with `instrumental: off` a sung "vocal" line (a glottal
 * source through vowel formants, syllables from the words) in a register set by
 * `vocalGender`. A cover follows the cover audio's tempo and key. The result is
 * exactly the requested number of seconds.
 */
import { rng, seedOf } from '../random.ts';
import type { MonoPcm } from './wav.ts';
import type { MusicJobRequest } from '../media-types.ts';

export const MUSIC_SAMPLE_RATE = 32_000;

/** What the music synthesizer reads of a music job (the shared payload type). */
export type MusicRequest = Omit<MusicJobRequest, 'operation' | 'mimeType'>;

/** What a cover contributes (measured on its audio). */
export interface CoverTraits {
  tempo: number | null;
  pitchClass: number | null;
}

export type Timbre = 'piano' | 'pluck' | 'organ' | 'saw' | 'bell';

/** The musical decisions, all derived from the request (and cover). */
export interface MusicPlan {
  bpm: number;
  /** Pitch class of the key's tonic (0 = C). */
  root: number;
  minor: boolean;
  progression: number[];
  lead: Timbre;
  drums: 'none' | 'soft' | 'full';
  vocal: null | { low: number; syllables: Vowel[] };
}

type Vowel = 'a' | 'e' | 'i' | 'o' | 'u';

const SLOW = /\b(slow|ballad|ambient|lo-?fi|chill|calm|sad|lullaby|dreamy|sleep|piano|acoustic|folk|gentle)\b/;
const FAST = /\b(fast|dance|edm|house|techno|punk|upbeat|energetic|rave|metal|rock|drum|party|pop|synth-?pop|running)\b/;
const MINOR = /\b(sad|dark|minor|melanchol\w*|night|rain|blue|moody|lonely|haunting|cold|winter|grief)\b/;
const MAJOR = /\b(happy|bright|major|sun\w*|joy\w*|summer|upbeat|love|cheerful|party)\b/;
const TIMBRES: Array<[RegExp, Timbre]> = [
  [/\b(piano|keys)\b/, 'piano'],
  [/\b(guitar|pluck\w*|harp|folk|acoustic|fingerpick\w*)\b/, 'pluck'],
  [/\b(organ|church|gospel)\b/, 'organ'],
  [/\b(synth\w*|edm|electro\w*|techno|house|neon)\b/, 'saw'],
  [/\b(bell\w*|chime\w*|music box|celesta|lullaby)\b/, 'bell'],
];
const PROGRESSIONS = {
  major: [
    [0, 4, 5, 3],
    [5, 3, 0, 4],
    [0, 5, 3, 4],
    [0, 3, 4, 3],
    [3, 0, 4, 5],
  ],
  minor: [
    [0, 5, 2, 6],
    [0, 3, 4, 0],
    [0, 6, 5, 6],
    [0, 3, 6, 2],
    [5, 6, 0, 0],
  ],
};
const SCALES = { major: [0, 2, 4, 5, 7, 9, 11], minor: [0, 2, 3, 5, 7, 8, 10] };

/** Tempo folded into 60–180 BPM (a cover at 200 is followed at 100). */
function foldTempo(bpm: number): number {
  let b = bpm;
  while (b > 180) b /= 2;
  while (b < 60) b *= 2;
  return b;
}

/** The vowels of the words, one per syllable-ish vowel group ("la" when there are none). */
function syllables(text: string): Vowel[] {
  const groups = text.toLowerCase().match(/[aeiouy]+/g) ?? [];
  const out = groups.map((g) => (g[0] === 'y' ? 'i' : (g[0] as Vowel)));
  return out.length ? out.slice(0, 2000) : ['a'];
}

/** Every choice the generator makes, deterministic from the request and the cover's traits. */
export function planMusic(req: MusicRequest, cover: CoverTraits | null): MusicPlan {
  const text = [req.prompt, req.style ?? '', req.title ?? ''].join(' ').toLowerCase();
  const negative = (req.negativeTags ?? '').toLowerCase();
  const random = rng(seedOf('music', req.prompt, req.style, req.title, req.negativeTags, req.seed));
  const slow = SLOW.test(text);
  const fast = FAST.test(text);
  const bpm = cover?.tempo ? foldTempo(cover.tempo) : Math.round(fast && !slow ? 118 + random() * 30 : slow && !fast ? 66 + random() * 22 : 88 + random() * 30);
  const minor = MINOR.test(text) ? true : MAJOR.test(text) ? false : random() < 0.4;
  const root = cover?.pitchClass ?? Math.floor(random() * 12);
  const options = PROGRESSIONS[minor ? 'minor' : 'major'];
  const progression = options[Math.floor(random() * options.length)]!;
  const wanted = TIMBRES.filter(([re]) => re.test(text) && !re.test(negative)).map(([, t]) => t);
  const allowed = (['piano', 'pluck', 'organ', 'saw', 'bell'] as Timbre[]).filter((t) => !TIMBRES.find(([, x]) => x === t)![0].test(negative));
  const lead = wanted[0] ?? allowed[Math.floor(random() * allowed.length)] ?? 'piano';
  const drums =
    /\bdrums?\b|percussion|beat/.test(negative) && !/heavy|loud/.test(negative) ? 'none' : /heavy|loud/.test(negative) || (slow && !fast) ? 'soft' : 'full';
  let vocal: MusicPlan['vocal'] = null;
  if (req.instrumental === 'off' && !/\bvocals?\b|\bvoice\b|singing/.test(negative)) {
    const gender =
      req.vocalGender === 'auto'
        ? /\b(female|woman|girl|she|her)\b/.test(text)
          ? 'f'
          : /\b(male|man|boy|he|his)\b/.test(text)
            ? 'm'
            : random() < 0.5
              ? 'f'
              : 'm'
        : req.vocalGender;
    // MIDI note of the bottom of the register: about A2 (110 Hz) for m, A3 (220 Hz) for f.
    vocal = { low: gender === 'f' ? 57 : 45, syllables: syllables(req.musicMode === 'advanced' ? req.prompt : `${req.title ?? ''} ${req.prompt}`) };
  }
  return { bpm: Math.round(bpm * 10) / 10, root, minor, progression, lead, drums, vocal };
}

// ---------------------------------------------------------------- rendering

const SR = MUSIC_SAMPLE_RATE;
const TABLE_SIZE = 4096;
const SINE = new Float32Array(TABLE_SIZE + 1).map((_, i) => Math.sin((2 * Math.PI * i) / TABLE_SIZE));
const midiHz = (m: number) => 440 * 2 ** ((m - 69) / 12);

/** Additive partials (relative amplitudes) and the decay time (s) of each lead timbre. */
const VOICES: Record<Timbre, { partials: number[]; decay: number; attack: number }> = {
  piano: { partials: [1, 0.5, 0.3, 0.15, 0.08, 0.04], decay: 0.9, attack: 0.004 },
  pluck: { partials: [1, 0.7, 0.45, 0.3, 0.2, 0.12, 0.08], decay: 0.45, attack: 0.002 },
  organ: { partials: [1, 0.8, 0, 0.5, 0, 0.3, 0, 0.2], decay: 8, attack: 0.02 },
  saw: { partials: [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6, 1 / 7, 1 / 8], decay: 1.5, attack: 0.01 },
  bell: { partials: [1, 0, 0.4, 0, 0.25, 0, 0, 0.15], decay: 1.6, attack: 0.002 },
};

/** Adds one note of an additive timbre into `out` (wavetable oscillators; exponential decay, short release). */
function addTone(out: Float32Array, start: number, seconds: number, hz: number, gain: number, partials: number[], decay: number, attack: number): void {
  const s0 = Math.max(0, Math.round(start * SR));
  const n = Math.min(out.length - s0, Math.round(seconds * SR));
  const release = Math.min(n, Math.round(0.03 * SR));
  const att = Math.max(1, Math.round(attack * SR));
  const decayPerSample = Math.exp(-1 / (decay * SR));
  partials.forEach((amp, k) => {
    const f = hz * (k + 1);
    if (amp === 0 || f >= SR / 2) return;
    const step = (f * TABLE_SIZE) / SR;
    let phase = 0;
    let env = 1;
    const a = gain * amp;
    for (let i = 0; i < n; i++) {
      const idx = phase | 0;
      const v = SINE[idx]! + (SINE[idx + 1]! - SINE[idx]!) * (phase - idx);
      const shape = (i < att ? i / att : 1) * (i > n - release ? (n - i) / release : 1);
      out[s0 + i]! += v * a * env * shape;
      env *= decayPerSample;
      phase += step;
      if (phase >= TABLE_SIZE) phase -= TABLE_SIZE;
    }
  });
}

function addKick(out: Float32Array, start: number, gain: number): void {
  const s0 = Math.round(start * SR);
  const n = Math.min(out.length - s0, Math.round(0.25 * SR));
  let phase = 0;
  for (let i = 0; i < n; i++) {
    const t = i / SR;
    const f = 50 + 100 * Math.exp(-t * 30);
    phase += (f * TABLE_SIZE) / SR;
    out[s0 + i]! += SINE[Math.floor(phase) % TABLE_SIZE]! * gain * Math.exp(-t * 14);
  }
}

function addNoiseHit(out: Float32Array, start: number, seconds: number, gain: number, bright: boolean, random: () => number, toneHz = 0): void {
  const s0 = Math.round(start * SR);
  const n = Math.min(out.length - s0, Math.round(seconds * SR));
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const env = Math.exp((-i / n) * 6);
    const white = random() * 2 - 1;
    // A first difference brightens (hi-hat); the raw noise plus a tone body makes a snare.
    const noise = bright ? white - prev : white;
    prev = white;
    const body = toneHz ? Math.sin((2 * Math.PI * toneHz * i) / SR) * 0.6 : 0;
    out[s0 + i]! += (noise * (bright ? 0.5 : 0.7) + body) * gain * env;
  }
}

/** Two-pole resonator (a formant); state kept by the caller. */
interface Formant {
  b0: number;
  a1: number;
  a2: number;
}
function formant(hz: number, bandwidth: number): Formant {
  const r = Math.exp((-Math.PI * bandwidth) / SR);
  return { b0: 1 - r, a1: 2 * r * Math.cos((2 * Math.PI * hz) / SR), a2: -r * r };
}
const VOWELS: Record<Vowel, [number, number, number]> = {
  a: [730, 1090, 2440],
  e: [530, 1840, 2480],
  i: [390, 1990, 2550],
  o: [570, 840, 2410],
  u: [440, 1020, 2240],
};

/** A sung syllable: a vibrato sawtooth source through three vowel formants. */
function addSung(out: Float32Array, start: number, seconds: number, hz: number, vowel: Vowel, gain: number): void {
  const s0 = Math.round(start * SR);
  const n = Math.min(out.length - s0, Math.round(seconds * SR));
  const shift = hz > 200 ? 1.15 : 1; // higher voices have higher formants
  const fs = VOWELS[vowel].map((f, k) => formant(f * shift, 80 + 40 * k));
  const weights = [1, 0.6, 0.3];
  const y1 = [0, 0, 0];
  const y2 = [0, 0, 0];
  let phase = 0;
  const att = Math.round(0.04 * SR);
  const rel = Math.round(0.06 * SR);
  for (let i = 0; i < n; i++) {
    const vibrato = 1 + 0.012 * Math.sin((2 * Math.PI * 5.5 * i) / SR) * Math.min(1, i / (0.2 * SR));
    phase += (hz * vibrato) / SR;
    if (phase >= 1) phase -= 1;
    const source = 2 * phase - 1;
    let v = 0;
    for (let k = 0; k < 3; k++) {
      const f = fs[k]!;
      const y = f.b0 * source + f.a1 * y1[k]! + f.a2 * y2[k]!;
      y2[k] = y1[k]!;
      y1[k] = y;
      v += y * weights[k]!;
    }
    const shape = Math.min(1, i / att) * Math.min(1, (n - i) / rel);
    out[s0 + i]! += v * gain * shape;
  }
}

/**
 * Notes repeat (the same pitch, length and timbre bar after bar), so each
 * distinct one is synthesized once and mixed in wherever it sounds: a 240 s
 * song renders in about a second.
 */
class NoteCache {
  private readonly notes = new Map<string, Float32Array>();
  constructor(private readonly out: Float32Array) {}

  mix(start: number, seconds: number, key: string, draw: (buf: Float32Array) => void): void {
    let note = this.notes.get(key);
    if (!note) {
      note = new Float32Array(Math.round(seconds * SR));
      draw(note);
      this.notes.set(key, note);
    }
    const s0 = Math.round(start * SR);
    const n = Math.min(note.length, this.out.length - s0);
    for (let i = 0; i < n; i++) this.out[s0 + i]! += note[i]!;
  }
}

/** Renders the plan to exactly `seconds` of mono PCM. */
export function renderMusic(plan: MusicPlan, seconds: number, seed: number): MonoPcm {
  const out = new Float32Array(Math.round(seconds * SR));
  const random = rng(seed);
  const cache = new NoteCache(out);
  const tone = (start: number, secs: number, hz: number, gain: number, partials: number[], decay: number, attack: number) =>
    cache.mix(start, secs, `t|${secs}|${hz}|${gain}|${partials.join(',')}|${decay}|${attack}`, (buf) =>
      addTone(buf, 0, secs, hz, gain, partials, decay, attack),
    );
  // A few takes of each drum hit, so the kit does not sound like one sample looped.
  const hit = (start: number, secs: number, gain: number, bright: boolean, toneHz = 0) =>
    cache.mix(start, secs, `n|${secs}|${gain}|${bright}|${toneHz}|${Math.floor(random() * 4)}`, (buf) =>
      addNoiseHit(buf, 0, secs, gain, bright, random, toneHz),
    );
  const kick = (start: number, gain: number) => cache.mix(start, 0.25, `k|${gain}`, (buf) => addKick(buf, 0, gain));
  const sung = (start: number, secs: number, hz: number, vowel: Vowel, gain: number) =>
    cache.mix(start, secs, `s|${secs}|${hz}|${vowel}|${gain}`, (buf) => addSung(buf, 0, secs, hz, vowel, gain));
  const beat = 60 / plan.bpm;
  const bar = beat * 4;
  const scale = SCALES[plan.minor ? 'minor' : 'major'];
  const degree = (d: number, octave: number) => 12 * octave + plan.root + scale[((d % 7) + 7) % 7]! + 12 * Math.floor(d / 7);
  const lead = VOICES[plan.lead];
  const bars = Math.ceil(seconds / bar);
  // A two-bar motif (scale steps from the chord root, null = rest), varied every other phrase.
  const motif = Array.from({ length: 16 }, (_, i) =>
    i % 4 === 0 ? [0, 2, 4][Math.floor(random() * 3)]! : random() < 0.3 ? null : Math.floor(random() * 7) - 1,
  );
  let syllable = 0;
  for (let b = 0; b < bars; b++) {
    const t0 = b * bar;
    const chord = plan.progression[b % plan.progression.length]!;
    const section = Math.floor(b / 8) % 2; // verse / chorus every 8 bars
    const intro = b < 2;
    // Pad: the chord's triad, held for the bar.
    for (const step of [0, 2, 4]) tone(t0, bar, midiHz(degree(chord + step, 4)), 0.045, [1, 0.3, 0.1], 6, 0.15);
    // Bass: root on every beat, the fifth on beat 4.
    for (let k = 0; k < 4; k++) tone(t0 + k * beat, beat * 0.9, midiHz(degree(chord + (k === 3 ? 4 : 0), 2)), 0.2, [1, 0.35, 0.1], 1.2, 0.005);
    // Drums: kick on every beat, snare on 2 and 4, hats on eighths (quiet).
    if (plan.drums !== 'none' && !intro) {
      const g = plan.drums === 'full' ? 1 : 0.5;
      for (let k = 0; k < 4; k++) {
        const t = t0 + k * beat;
        kick(t, 0.5 * g);
        if (k % 2 === 1) hit(t, 0.18, 0.16 * g, false, 190);
      }
      for (let e = 0; e < 8; e++) hit(t0 + e * (beat / 2), 0.05, (e % 2 ? 0.035 : 0.05) * g, true);
    }
    // Melody: the motif over this bar's chord, an octave up in the chorus.
    if (intro) continue;
    for (let e = 0; e < 8; e++) {
      const step = motif[(b % 2) * 8 + e];
      if (step === null || step === undefined) continue;
      const varied = Math.floor(b / 4) % 2 === 1 && e === 6 ? step + 1 : step;
      const midi = degree(chord + varied, 5 + section);
      tone(t0 + e * (beat / 2), beat * 0.5, midiHz(midi), 0.09, lead.partials, lead.decay, lead.attack);
      if (plan.vocal && e % 2 === 0) {
        // The vocal sings the melody in its register, one syllable per quarter note.
        let m = midi;
        while (m > plan.vocal.low + 12) m -= 12;
        while (m < plan.vocal.low) m += 12;
        const vowel = plan.vocal.syllables[syllable++ % plan.vocal.syllables.length]!;
        sung(t0 + e * (beat / 2), beat * 0.95, midiHz(m), vowel, 0.16);
      }
    }
  }
  // Master: soft clip, fades at both ends, peak at -1 dBFS.
  let peak = 0;
  for (let i = 0; i < out.length; i++) {
    out[i] = Math.tanh(out[i]! * 1.2);
    peak = Math.max(peak, Math.abs(out[i]!));
  }
  const fadeIn = Math.min(out.length, Math.round(0.01 * SR));
  const fadeOut = Math.min(out.length, Math.round(Math.min(2, seconds / 10) * SR));
  const k = peak > 0 ? 0.89 / peak : 1;
  for (let i = 0; i < out.length; i++) {
    const f = Math.min(1, i / fadeIn, (out.length - i) / fadeOut);
    out[i] = out[i]! * k * f;
  }
  return { sampleRate: SR, samples: out };
}
