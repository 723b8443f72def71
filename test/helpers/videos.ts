/**
 * Videos with known content for the extraction tests, made with the shipped
 * ffmpeg (never downloaded): solid colour shots concatenated at known cut times,
 * with or without a tone; a detailed (sharp) shot; a long but tiny video; a big
 * one of high-bitrate noise. Files go to one temp dir per process, memoised by name.
 */
import { ffmpegWith, fixtureFiles } from './fixture-files.ts';

const { memo } = fixtureFiles('gemforge-videos-');
const ffmpeg = ffmpegWith(180_000);
const H264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'];

/** One shot: an lavfi source (e.g. `color=red`, `testsrc`) for `seconds`. */
export interface Shot {
  source: string;
  seconds: number;
}

/** The shots of the cut test: red 0–2 s, green 2–4.5 s, blue 4.5–6 s. */
export const RGB_SHOTS: Shot[] = [
  { source: 'color=c=red', seconds: 2 },
  { source: 'color=c=green', seconds: 2.5 },
  { source: 'color=c=blue', seconds: 1.5 },
];

/** Where the cuts of a shot list are, in seconds. */
export function cutTimes(shots: Shot[]): number[] {
  const out: number[] = [];
  let t = 0;
  for (const s of shots.slice(0, -1)) out.push((t += s.seconds));
  return out;
}

/**
 * Shots concatenated into one MP4 (H.264, 320×180, 25 fps), optionally with a
 * 440 Hz tone (AAC) as long as the video.
 */
export function shotsVideo(name: string, shots: Shot[], options: { audio?: boolean; size?: string; fps?: number } = {}): Promise<string> {
  const size = options.size ?? '320x180';
  const fps = options.fps ?? 25;
  const total = shots.reduce((n, s) => n + s.seconds, 0);
  return memo(`${name}.mp4`, async (file) => {
    const inputs = shots.flatMap((s) => [
      '-f',
      'lavfi',
      '-i',
      `${s.source}${s.source.includes('=') ? ':' : '='}size=${size}:rate=${fps}:duration=${s.seconds}`,
    ]);
    const concat = `${shots.map((_, i) => `[${i}:v]`).join('')}concat=n=${shots.length}:v=1:a=0[v]`;
    const audio = options.audio ? ['-f', 'lavfi', '-i', `sine=frequency=440:duration=${total}`] : [];
    await ffmpeg([
      ...inputs,
      ...audio,
      '-filter_complex',
      concat,
      '-map',
      '[v]',
      ...(options.audio ? ['-map', `${shots.length}:a`, '-c:a', 'aac'] : []),
      ...H264,
      '-t',
      String(total),
      file,
    ]);
  });
}

/** A long but tiny video: `seconds` of 64×36 at 1 fps (a few KiB). */
export function longTinyVideo(seconds: number): Promise<string> {
  return memo(`long-${seconds}.mp4`, async (file) => {
    await ffmpeg(['-f', 'lavfi', '-i', `testsrc=size=64x36:rate=1:duration=${seconds}`, ...H264, file]);
  });
}

/**
 * A video of more than 25 MiB and at most 30 MiB (so it uploads): 8 s of
 * 320×240 seeded noise encoded losslessly (the encoder cannot compress noise),
 * ≈ 27.2 MiB, made in about a second.
 */
export function bigVideo(): Promise<string> {
  return memo('big.mp4', async (file) => {
    await ffmpeg([
      '-f',
      'lavfi',
      '-i',
      'color=c=gray:size=320x240:rate=25:duration=8,noise=alls=100:allf=t+u:all_seed=42',
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-qp',
      '0',
      '-pix_fmt',
      'yuv420p',
      file,
    ]);
  });
}
