/**
 * Measurements the audio generators (and their tests) make on mono PCM:
 * median speaking pitch (YIN, shared with voice upload), tempo (autocorrelation
 * of an onset envelope) and the dominant pitch class (a chroma sum).
 */
import { analyzeSpeech } from '../../media/vad.ts';
import type { MonoPcm } from './wav.ts';

/** Median pitch (Hz) of the voiced frames in the first `maxSeconds`, or null when nothing is voiced. */
export function medianPitchHz(pcm: MonoPcm, maxSeconds = 20): number | null {
  // 8–11 kHz is plenty for pitch and keeps YIN fast.
  let { samples, sampleRate } = pcm;
  while (sampleRate > 16_000) {
    const half = new Float32Array(Math.floor(samples.length / 2));
    for (let i = 0; i < half.length; i++) half[i] = (samples[2 * i] + samples[2 * i + 1]) / 2;
    samples = half;
    sampleRate /= 2;
  }
  return analyzeSpeech(samples.subarray(0, Math.floor(maxSeconds * sampleRate)), sampleRate).medianPitchHz;
}

const HOP_SECONDS = 0.01;
/** How strong the pulse at half the best period must be (relative) to be taken as the beat. */
const HALF_PERIOD_RATIO = 0.7;

/** Onset strength every 10 ms: the rise of log energy (half-wave rectified). */
function onsetEnvelope(pcm: MonoPcm): Float64Array {
  const hop = Math.round(pcm.sampleRate * HOP_SECONDS);
  const frames = Math.floor(pcm.samples.length / hop);
  const env = new Float64Array(frames);
  let prev = -10;
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let i = f * hop; i < (f + 1) * hop; i++) sum += pcm.samples[i] * pcm.samples[i];
    const level = Math.log10(sum / hop + 1e-10);
    env[f] = Math.max(0, level - prev);
    prev = level;
  }
  // Smoothed over ±20 ms, so beats that fall between frames still line up.
  const smooth = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let k = -2; k <= 2; k++) sum += env[Math.min(frames - 1, Math.max(0, f + k))] * (3 - Math.abs(k));
    smooth[f] = sum / 9;
  }
  return smooth;
}

/**
 * Tempo in beats per minute (60–180), or null for a signal without a pulse.
 * The beat period is the lag with the strongest (biased) autocorrelation of the
 * onset envelope, or half of it when the pulse there is nearly as strong; the
 * bias breaks ties toward the faster of two related tempi.
 */
export function estimateTempo(pcm: MonoPcm, maxSeconds = 60): number | null {
  const env = onsetEnvelope({ sampleRate: pcm.sampleRate, samples: pcm.samples.subarray(0, Math.floor(maxSeconds * pcm.sampleRate)) });
  const n = env.length;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += env[i];
  mean /= Math.max(1, n);
  for (let i = 0; i < n; i++) env[i] -= mean;
  const minLag = Math.round(60 / 180 / HOP_SECONDS);
  const maxLag = Math.round(60 / 60 / HOP_SECONDS);
  if (n < maxLag * 3) return null;
  const ac = new Float64Array(maxLag + 2);
  let zero = 0;
  for (let i = 0; i < n; i++) zero += env[i] * env[i];
  if (zero <= 0) return null;
  for (let lag = minLag - 1; lag <= maxLag + 1; lag++) {
    let sum = 0;
    for (let i = 0; i + lag < n; i++) sum += env[i] * env[i + lag];
    ac[lag] = sum / zero;
  }
  let best = minLag;
  for (let lag = minLag; lag <= maxLag; lag++) if (ac[lag] > ac[best]) best = lag;
  if (ac[best] < 0.05) return null;
  // A strong pulse at half the period means the peak found is every other beat (e.g. a kick on 1 and 3).
  const half = Math.round(best / 2);
  if (half >= minLag) {
    let h = half;
    for (let lag = half - 1; lag <= half + 1; lag++) if (ac[lag] > ac[h]) h = lag;
    if (ac[h] >= HALF_PERIOD_RATIO * ac[best]) best = h;
  }
  // Parabolic refinement of the peak.
  const a = ac[best - 1];
  const b = ac[best];
  const c = ac[best + 1];
  const denom = a - 2 * b + c;
  const lag = denom < 0 ? best + (a - c) / (2 * denom) : best;
  return Math.round((60 / (lag * HOP_SECONDS)) * 10) / 10;
}

/**
 * The dominant pitch class (0 = C … 11 = B) over the first `maxSeconds`: the
 * Goertzel energy of every semitone from C2 to B6 in 0.25 s windows, summed by
 * pitch class. Null for silence.
 */
export function dominantPitchClass(pcm: MonoPcm, maxSeconds = 30): number | null {
  const { sampleRate } = pcm;
  const samples = pcm.samples.subarray(0, Math.floor(maxSeconds * sampleRate));
  const win = Math.round(sampleRate * 0.25);
  const chroma = new Float64Array(12);
  const coeffs: Array<{ pc: number; k: number }> = [];
  for (let midi = 36; midi < 96; midi++) {
    const hz = 440 * 2 ** ((midi - 69) / 12);
    if (hz < sampleRate / 2) coeffs.push({ pc: midi % 12, k: 2 * Math.cos((2 * Math.PI * hz) / sampleRate) });
  }
  // Every other window is plenty for a long signal.
  for (let start = 0; start + win <= samples.length; start += win * (samples.length > win * 40 ? 2 : 1)) {
    for (const { pc, k } of coeffs) {
      let s1 = 0;
      let s2 = 0;
      for (let i = start; i < start + win; i++) {
        const s0 = samples[i] + k * s1 - s2;
        s2 = s1;
        s1 = s0;
      }
      chroma[pc] += Math.sqrt(Math.max(0, s1 * s1 + s2 * s2 - k * s1 * s2));
    }
  }
  let best = 0;
  for (let pc = 1; pc < 12; pc++) if (chroma[pc] > chroma[best]) best = pc;
  return chroma[best] > 0 ? best : null;
}
