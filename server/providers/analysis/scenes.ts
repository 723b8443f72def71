/**
 * From ffmpeg's cuts and the sampled frames to scenes with measurements and
 * suggested frames (pure, no I/O): the local analyzer's core.
 */
import type { Cut, SampledFrames } from './decode.ts';
import { brightness, colourCounts, dominantColours, frameDifference, laplacianVariance, luma, sharpnessScore, type ColourName } from './measures.ts';

/** Cuts closer than this to the previous boundary or to the end are merged into their neighbour. */
export const MIN_SCENE_SECONDS = 0.4;
/** At most this many scenes (the strongest cuts win). */
export const MAX_SCENES = 50;
/** Samples this close to a scene's edges may still show the neighbouring scene: not used for its measurements. */
const EDGE_SECONDS = 0.05;

export type FrameReason = 'scene_start' | 'sharpest' | 'representative';

export interface Scene {
  startSeconds: number;
  endSeconds: number;
  /** Score of the cut that starts it (1 for the first scene). */
  cutScore: number;
  colours: Array<{ name: ColourName; share: number }>;
  /** Colour-name pixel counts of the scene's samples (for whole-video colours). */
  colourCounts: Map<ColourName, number>;
  brightness: number;
  /** Mean frame difference between consecutive samples inside the scene, 0–1. */
  motion: number;
  /** Number of sample pairs behind `motion`. */
  motionPairs: number;
  /** The suggested frame inside the scene besides its start. */
  pick: { timeSeconds: number; reason: 'sharpest' | 'representative'; score: number } | undefined;
}

/** Rounds to milliseconds (times in the response). */
export const ms = (t: number) => Math.round(t * 1000) / 1000;

/** The cuts kept as scene starts: ≥ MIN_SCENE_SECONDS apart and from the end, at most MAX_SCENES − 1, in time order. */
export function keptCuts(cuts: Cut[], durationSeconds: number, minScene = MIN_SCENE_SECONDS, maxScenes = MAX_SCENES): Cut[] {
  const sorted = [...cuts].filter((c) => Number.isFinite(c.timeSeconds)).sort((a, b) => a.timeSeconds - b.timeSeconds);
  const kept: Cut[] = [];
  let last = 0;
  for (const c of sorted) {
    if (c.timeSeconds - last < minScene || durationSeconds - c.timeSeconds < minScene) continue;
    kept.push(c);
    last = c.timeSeconds;
  }
  if (kept.length <= maxScenes - 1) return kept;
  return kept
    .map((c, i) => ({ c, i }))
    .sort((a, b) => b.c.score - a.c.score || a.i - b.i)
    .slice(0, maxScenes - 1)
    .sort((a, b) => a.i - b.i)
    .map((x) => x.c);
}

interface Sample {
  index: number;
  time: number;
  rgb: Buffer;
  gray: Float32Array;
}

/** The samples measured for a scene: those inside its edges, or (a very short scene) every one within it. */
function samplesOf(all: Sample[], start: number, end: number, last: boolean): Sample[] {
  const inner = all.filter((s) => s.time >= start + EDGE_SECONDS && s.time <= end - EDGE_SECONDS);
  if (inner.length > 0) return inner;
  return all.filter((s) => s.time >= start && (last ? s.time <= end : s.time < end));
}

function pickFrame(samples: Sample[], width: number, height: number, start: number): Scene['pick'] {
  const candidates = samples.filter((s) => ms(s.time) > ms(start));
  if (candidates.length === 0) return undefined;
  let best = candidates[0]!;
  let bestVar = -1;
  for (const s of candidates) {
    const v = laplacianVariance(s.gray, width, height);
    if (v > bestVar) {
      best = s;
      bestVar = v;
    }
  }
  if (bestVar >= 1) return { timeSeconds: ms(best.time), reason: 'sharpest', score: ms(sharpnessScore(bestVar)) };
  // A flat scene has no sharpest frame: suggest the one closest to the scene's average picture.
  const mean = new Float32Array(candidates[0]!.gray.length);
  for (const s of candidates) for (let i = 0; i < mean.length; i++) mean[i]! += s.gray[i]! / candidates.length;
  // Ties (a still scene) go to the middle of the scene.
  let rep = candidates[Math.floor((candidates.length - 1) / 2)]!;
  let repDiff = frameDifference(rep.gray, mean);
  for (const s of candidates) {
    const d = frameDifference(s.gray, mean);
    if (d < repDiff - 1e-9) {
      rep = s;
      repDiff = d;
    }
  }
  return { timeSeconds: ms(rep.time), reason: 'representative', score: ms(Math.max(0, 1 - repDiff * 10)) };
}

/** Builds the scenes of a video from its kept cuts and samples. */
export function buildScenes(cuts: Cut[], samples: SampledFrames, durationSeconds: number): Scene[] {
  const all: Sample[] = samples.frames.map((rgb, index) => ({ index, time: index / samples.fps, rgb, gray: luma(rgb) }));
  const starts = [{ timeSeconds: 0, score: 1 }, ...keptCuts(cuts, durationSeconds)];
  return starts.map((cut, k) => {
    const start = ms(cut.timeSeconds);
    const end = k + 1 < starts.length ? ms(starts[k + 1]!.timeSeconds) : ms(durationSeconds);
    const inside = samplesOf(all, start, end, k + 1 === starts.length);
    let diff = 0;
    let pairs = 0;
    for (let i = 1; i < inside.length; i++) {
      if (inside[i]!.index !== inside[i - 1]!.index + 1) continue;
      diff += frameDifference(inside[i - 1]!.gray, inside[i]!.gray);
      pairs++;
    }
    const light = inside.length ? inside.reduce((sum, s) => sum + brightness(s.gray), 0) / inside.length : 0;
    const counts = colourCounts(inside.map((s) => s.rgb));
    return {
      startSeconds: start,
      endSeconds: end,
      cutScore: ms(cut.score),
      colours: dominantColours(counts),
      colourCounts: counts,
      brightness: light,
      motion: pairs ? diff / pairs : 0,
      motionPairs: pairs,
      pick: pickFrame(inside, samples.width, samples.height, start),
    };
  });
}

/** The suggested frames: every scene start, then each scene's pick; unique times, in order. */
export function suggestedFrames(scenes: Scene[]): Array<{ timeSeconds: number; reason: FrameReason; score: number }> {
  const byTime = new Map<number, { timeSeconds: number; reason: FrameReason; score: number }>();
  for (const s of scenes) {
    byTime.set(s.startSeconds, { timeSeconds: s.startSeconds, reason: 'scene_start', score: s.cutScore });
    if (s.pick && !byTime.has(s.pick.timeSeconds)) byTime.set(s.pick.timeSeconds, { ...s.pick });
  }
  return [...byTime.values()].sort((a, b) => a.timeSeconds - b.timeSeconds);
}
