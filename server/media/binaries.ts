/**
 * Where the ffmpeg and ffprobe binaries come from: static builds shipped inside
 * npm packages (`@ffmpeg-installer/ffmpeg`, `@ffprobe-installer/ffprobe`), so a
 * machine with only Node and npm can probe and decode media. `FFMPEG_PATH` and
 * `FFPROBE_PATH` override them (read in server/config.ts).
 */
import ffmpegInstaller from '@ffmpeg-installer/ffmpeg';
import ffprobeInstaller from '@ffprobe-installer/ffprobe';

/** Path of the npm-shipped ffmpeg binary for this platform. */
export function bundledFfmpegPath(): string {
  return ffmpegInstaller.path;
}

/** Path of the npm-shipped ffprobe binary for this platform. */
export function bundledFfprobePath(): string {
  return ffprobeInstaller.path;
}
