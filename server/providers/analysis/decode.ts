/**
 * One decoding pass over a video with the shipped ffmpeg, for the local analyzer:
 *   - scene changes: ffmpeg's scene score at full frame rate
 *     (`select='gt(scene,T)',metadata=print`), with each cut's exact `pts_time`;
 *   - small RGB frames sampled at a few frames a second (for colours, motion and sharpness);
 * and, when the file has audio, its loudness from decoded PCM.
 */
import fsp from 'node:fs/promises';
import { decodePcm } from '../../media/pcm.ts';
import { runTool } from '../../media/run.ts';

/** ffmpeg's scene score (0–1) above which a frame starts a new scene. */
export const SCENE_THRESHOLD = 0.3;
/** At most this many sampled frames per video (the sampling rate drops for long videos). */
export const MAX_SAMPLES = 240;
/** The sampling rate of short videos, in frames a second. */
export const MAX_SAMPLE_FPS = 4;
/** The longer side of a sampled frame, in pixels. */
export const SAMPLE_LONG_SIDE = 128;

export interface Cut {
  timeSeconds: number;
  /** ffmpeg's scene score of the first frame after the cut, 0–1. */
  score: number;
}

export interface SampledFrames {
  fps: number;
  width: number;
  height: number;
  /** RGB24 pixels of each sample; sample i shows time i / fps. */
  frames: Buffer[];
}

export interface Decoded {
  cuts: Cut[];
  samples: SampledFrames;
  audio: { rmsDb: number; peakDb: number } | null;
}

/** Sampling rate for a video of this length: MAX_SAMPLE_FPS, lower when that would exceed MAX_SAMPLES. */
export function sampleFps(durationSeconds: number): number {
  if (!(durationSeconds > 0)) return MAX_SAMPLE_FPS;
  return Math.min(MAX_SAMPLE_FPS, Math.floor((MAX_SAMPLES / durationSeconds) * 1000) / 1000);
}

/** Sample size: the longer side SAMPLE_LONG_SIDE, the aspect kept, both sides even and ≥ 8. */
export function sampleSize(width: number | null, height: number | null): { width: number; height: number } {
  const w = width && width > 0 ? width : 16;
  const h = height && height > 0 ? height : 9;
  const even = (n: number) => Math.max(8, Math.round(n / 2) * 2);
  return w >= h ? { width: SAMPLE_LONG_SIDE, height: even((SAMPLE_LONG_SIDE * h) / w) } : { width: even((SAMPLE_LONG_SIDE * w) / h), height: SAMPLE_LONG_SIDE };
}

/** Parses `metadata=print` output: `frame:N pts:P pts_time:T` then `lavfi.scene_score=S`. */
export function parseSceneLog(text: string): Cut[] {
  const cuts: Cut[] = [];
  let time: number | undefined;
  for (const line of text.split('\n')) {
    const t = /pts_time:(-?[0-9.]+(?:e-?\d+)?)/.exec(line);
    if (t) {
      time = Number(t[1]);
      continue;
    }
    const s = /lavfi\.scene_score=([0-9.]+(?:e-?\d+)?)/.exec(line);
    if (s && time !== undefined && Number.isFinite(time)) {
      cuts.push({ timeSeconds: Math.max(0, time), score: Math.min(1, Math.max(0, Number(s[1]))) });
      time = undefined;
    }
  }
  return cuts;
}

/** Splits raw RGB24 bytes into whole frames (a trailing partial frame is dropped). */
export function splitFrames(raw: Buffer, width: number, height: number): Buffer[] {
  const size = width * height * 3;
  const out: Buffer[] = [];
  for (let at = 0; at + size <= raw.length; at += size) out.push(raw.subarray(at, at + size));
  return out;
}

export interface DecodeOptions {
  ffmpegPath: string;
  /** Where the sampled frames are written while decoding (removed afterwards). */
  tempFile: string;
  durationSeconds: number;
  width: number | null;
  height: number | null;
  hasAudio: boolean;
  timeoutMs?: number;
}

/** Decodes `file` once for cuts and samples, and its audio for loudness (both at once). */
export async function decodeVideo(file: string, options: DecodeOptions): Promise<Decoded> {
  const fps = sampleFps(options.durationSeconds);
  const size = sampleSize(options.width, options.height);
  const graph = [
    '[0:v:0]setpts=PTS-STARTPTS,split[a][b]',
    // The scene log goes to stdout (`pipe:1`; the `:` is escaped for the filter parser).
    `[a]scale=160:-2,select='gt(scene,${SCENE_THRESHOLD})',metadata=print:file=pipe\\\\:1[s]`,
    `[b]fps=fps=${fps},scale=${size.width}:${size.height}:flags=area,format=rgb24[r]`,
  ].join(';');
  const video = (async () => {
    try {
      const log = await runTool(
        options.ffmpegPath,
        [
          '-v',
          'error',
          '-nostdin',
          '-y',
          '-t',
          '130',
          '-i',
          file,
          '-filter_complex',
          graph,
          '-map',
          '[s]',
          '-f',
          'null',
          '-',
          '-map',
          '[r]',
          '-f',
          'rawvideo',
          options.tempFile,
        ],
        { timeoutMs: options.timeoutMs ?? 180_000, maxStdoutBytes: 4 * 1024 * 1024 },
      );
      const raw = await fsp.readFile(options.tempFile);
      return { cuts: parseSceneLog(log.toString('utf8')), samples: { fps, ...size, frames: splitFrames(raw, size.width, size.height) } };
    } finally {
      await fsp.rm(options.tempFile, { force: true });
    }
  })();
  const audio = options.hasAudio ? decodePcm(options.ffmpegPath, file, { sampleRate: 8000, maxSeconds: 130 }).then(loudness) : Promise.resolve(null);
  const [v, a] = await Promise.all([video, audio]);
  return { ...v, audio: a };
}

/** RMS and peak level in dBFS (−120 for digital silence). */
export function loudness(pcm: { samples: Float32Array }): { rmsDb: number; peakDb: number } {
  let sum = 0;
  let peak = 0;
  for (const s of pcm.samples) {
    sum += s * s;
    const a = Math.abs(s);
    if (a > peak) peak = a;
  }
  const db = (x: number) => (x > 1e-6 ? Math.max(-120, 20 * Math.log10(x)) : -120);
  const rms = pcm.samples.length ? Math.sqrt(sum / pcm.samples.length) : 0;
  return { rmsDb: Math.round(db(rms) * 10) / 10, peakDb: Math.round(db(peak) * 10) / 10 };
}
