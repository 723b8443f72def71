/**
 * Voice-activity analysis over decoded mono PCM: the embedded stand-in for
 * transcription. It accepts speech and rejects silence, noise and steady tones
 * by four features a speech signal has together and those signals lack:
 *
 * 1. Energy: frames 10 ms apart (32 ms windows) above -50 dBFS are "active".
 *    Silence has (almost) none.
 * 2. Periodicity: the YIN cumulative-mean-normalised difference function finds
 *    a pitch period in 70–400 Hz (voicing when its dip is below 0.25). White and
 *    pink noise have no such dip, so they have (almost) no voiced frames.
 * 3. Pitch variation: the interquartile range of the voiced pitch, in
 *    semitones. Intonation moves it by several semitones; a steady tone stays
 *    within a fraction of one.
 * 4. Syllabic modulation: peaks of the smoothed energy envelope separated by
 *    dips of at least 4 dB, per active second. Speech has about 2–8; a steady
 *    tone or steady noise has close to none.
 *
 * The thresholds are deliberately loose for speech and strict for the three
 * non-speech classes; see test/unit/media-vad.test.ts.
 */

export interface SpeechAnalysis {
  speech: boolean;
  /** Why the recording was not accepted as speech (a sentence for the client). */
  reason?: string;
  durationSeconds: number;
  activeSeconds: number;
  voicedSeconds: number;
  /** Median pitch of voiced frames (Hz), null without voiced frames. */
  medianPitchHz: number | null;
  /** Interquartile range of the voiced pitch, in semitones. */
  pitchIqrSemitones: number;
  /** Energy-envelope peaks per active second (a syllable-rate estimate). */
  syllablesPerSecond: number;
  /** Mean level of active frames, dBFS. */
  activeLevelDb: number | null;
}

export const VAD_LIMITS = {
  minActiveSeconds: 1,
  minVoicedSeconds: 1.5,
  minVoicedRatio: 0.1,
  minPitchIqrSemitones: 0.5,
  minSyllablesPerSecond: 0.8,
} as const;

const WINDOW_SECONDS = 0.032;
const HOP_SECONDS = 0.01;
const MIN_PITCH_HZ = 70;
const MAX_PITCH_HZ = 400;
const YIN_VOICED = 0.25;
const ACTIVE_DB = -50;

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/** Level of one window in dBFS. */
function levelDb(x: Float32Array, start: number, length: number): number {
  let sum = 0;
  for (let i = start; i < start + length; i++) sum += x[i]! * x[i]!;
  return 10 * Math.log10(sum / length + 1e-20);
}

/**
 * YIN pitch of one window: the period (samples) with the lowest normalised
 * difference in [minLag, maxLag], and that difference (0 = perfectly periodic).
 */
export function yin(x: Float32Array, start: number, length: number, minLag: number, maxLag: number): { lag: number; dip: number } {
  const w = length - maxLag;
  const d = new Float64Array(maxLag + 1);
  for (let tau = 1; tau <= maxLag; tau++) {
    let sum = 0;
    for (let j = start; j < start + w; j++) {
      const diff = x[j]! - x[j + tau]!;
      sum += diff * diff;
    }
    d[tau] = sum;
  }
  let running = 0;
  let best = { lag: 0, dip: Infinity };
  const norm = new Float64Array(maxLag + 1);
  for (let tau = 1; tau <= maxLag; tau++) {
    running += d[tau]!;
    norm[tau] = running > 0 ? (d[tau]! * tau) / running : 1;
  }
  for (let tau = minLag; tau <= maxLag; tau++) {
    // The first dip under the threshold, followed down to its local minimum (YIN step 4).
    if (norm[tau]! < YIN_VOICED) {
      while (tau + 1 <= maxLag && norm[tau + 1]! < norm[tau]!) tau++;
      return { lag: refine(norm, tau, maxLag), dip: norm[tau]! };
    }
    if (norm[tau]! < best.dip) best = { lag: tau, dip: norm[tau]! };
  }
  return best;
}

/** Parabolic interpolation around a minimum, for sub-sample periods. */
function refine(norm: Float64Array, tau: number, maxLag: number): number {
  if (tau <= 1 || tau >= maxLag) return tau;
  const a = norm[tau - 1]!;
  const b = norm[tau]!;
  const c = norm[tau + 1]!;
  const denom = a - 2 * b + c;
  return denom > 0 ? tau + (a - c) / (2 * denom) : tau;
}

/** Counts envelope peaks that rise at least `dipDb` above the dips on both sides. */
function countSyllables(envelope: number[], dipDb: number): number {
  let peaks = 0;
  let lastMin = Infinity;
  let candidate = -Infinity;
  let rising = true;
  for (const v of envelope) {
    if (rising) {
      if (v > candidate) candidate = v;
      else if (candidate - v >= dipDb && candidate - lastMin >= dipDb) {
        peaks++;
        rising = false;
        lastMin = v;
      } else if (candidate - v >= dipDb) {
        rising = false;
        lastMin = v;
      }
    } else if (v < lastMin) {
      lastMin = v;
    } else if (v - lastMin >= dipDb) {
      rising = true;
      candidate = v;
    }
  }
  if (rising && candidate - lastMin >= dipDb && Number.isFinite(lastMin)) peaks++;
  return peaks;
}

/** Analyses mono PCM (any rate; 8–16 kHz is plenty) for speech. */
export function analyzeSpeech(samples: Float32Array, sampleRate: number): SpeechAnalysis {
  const window = Math.round(WINDOW_SECONDS * sampleRate);
  const hop = Math.round(HOP_SECONDS * sampleRate);
  const minLag = Math.floor(sampleRate / MAX_PITCH_HZ);
  const maxLag = Math.min(Math.ceil(sampleRate / MIN_PITCH_HZ), window - Math.floor(window / 3));
  const frames = samples.length >= window ? Math.floor((samples.length - window) / hop) + 1 : 0;
  const levels = new Array<number>(frames);
  for (let f = 0; f < frames; f++) levels[f] = levelDb(samples, f * hop, window);

  const threshold = ACTIVE_DB;
  const active = levels.map((l) => l > threshold);

  const pitches: number[] = [];
  let activeCount = 0;
  let activeLevelSum = 0;
  for (let f = 0; f < frames; f++) {
    if (!active[f]) continue;
    activeCount++;
    activeLevelSum += levels[f]!;
    const { lag, dip } = yin(samples, f * hop, window, minLag, maxLag);
    if (dip < YIN_VOICED && lag > 0) {
      const hz = sampleRate / lag;
      if (hz >= MIN_PITCH_HZ && hz <= MAX_PITCH_HZ) pitches.push(hz);
    }
  }

  // Smoothed envelope (50 ms moving average of dB) over the whole recording, floored at the threshold.
  const clipped = levels.map((l) => Math.max(l, threshold));
  const envelope = clipped.map((_, i) => {
    let s = 0;
    let n = 0;
    for (let k = Math.max(0, i - 2); k <= Math.min(frames - 1, i + 2); k++) {
      s += clipped[k]!;
      n++;
    }
    return s / n;
  });

  const activeSeconds = activeCount * HOP_SECONDS;
  const voicedSeconds = pitches.length * HOP_SECONDS;
  const semis = pitches.map((hz) => 12 * Math.log2(hz)).sort((a, b) => a - b);
  const pitchIqr = semis.length >= 4 ? quantile(semis, 0.75) - quantile(semis, 0.25) : 0;
  const sortedHz = [...pitches].sort((a, b) => a - b);
  const syllables = activeCount > 0 ? countSyllables(envelope, 4) : 0;
  const result: SpeechAnalysis = {
    speech: false,
    durationSeconds: samples.length / sampleRate,
    activeSeconds: round(activeSeconds),
    voicedSeconds: round(voicedSeconds),
    medianPitchHz: sortedHz.length > 0 ? round(quantile(sortedHz, 0.5)) : null,
    pitchIqrSemitones: round(pitchIqr),
    syllablesPerSecond: activeSeconds > 0 ? round(syllables / activeSeconds) : 0,
    activeLevelDb: activeCount > 0 ? round(activeLevelSum / activeCount) : null,
  };
  result.reason = verdict(result, activeCount);
  result.speech = result.reason === undefined;
  return result;
}

function verdict(a: SpeechAnalysis, activeFrames: number): string | undefined {
  if (a.activeSeconds < VAD_LIMITS.minActiveSeconds) {
    return 'No speech was detected: the recording is silent or nearly silent.';
  }
  if (a.voicedSeconds < VAD_LIMITS.minVoicedSeconds || a.voicedSeconds / (activeFrames * HOP_SECONDS) < VAD_LIMITS.minVoicedRatio) {
    return 'No speech was detected: the recording has no voiced sound (it sounds like noise only).';
  }
  if (a.pitchIqrSemitones < VAD_LIMITS.minPitchIqrSemitones) {
    return 'No speech was detected: the recording is a steady tone (its pitch does not vary like a voice).';
  }
  if (a.syllablesPerSecond < VAD_LIMITS.minSyllablesPerSecond) {
    return 'No speech was detected: the sound has no syllable rhythm (its loudness does not vary like speech).';
  }
  return undefined;
}

const round = (v: number) => Math.round(v * 100) / 100;
