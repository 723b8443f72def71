/** Decoding any supported audio to mono float PCM with ffmpeg, for analysis. */
import { runTool } from './run.ts';

export interface Pcm {
  sampleRate: number;
  samples: Float32Array;
  /** Decoded length in seconds. */
  durationSeconds: number;
}

/**
 * Decodes the first audio stream of `file` to mono 16-bit PCM at `sampleRate`
 * (default 16 kHz), at most `maxSeconds` of it, and returns it as floats in [-1, 1].
 * Rejects (ToolError) when ffmpeg cannot decode the file.
 */
export async function decodePcm(ffmpegPath: string, file: string, options: { sampleRate?: number; maxSeconds?: number } = {}): Promise<Pcm> {
  const sampleRate = options.sampleRate ?? 16_000;
  const maxSeconds = options.maxSeconds ?? 600;
  const raw = await runTool(
    ffmpegPath,
    [
      '-v',
      'error',
      '-nostdin',
      '-i',
      file,
      '-map',
      '0:a:0',
      '-vn',
      '-ac',
      '1',
      '-ar',
      String(sampleRate),
      '-t',
      String(maxSeconds),
      '-f',
      's16le',
      '-acodec',
      'pcm_s16le',
      'pipe:1',
    ],
    { timeoutMs: 120_000, maxStdoutBytes: Math.ceil(maxSeconds * sampleRate * 2) + 65_536 },
  );
  const count = Math.floor(raw.length / 2);
  const samples = new Float32Array(count);
  for (let i = 0; i < count; i++) samples[i] = raw.readInt16LE(i * 2) / 32768;
  return { sampleRate, samples, durationSeconds: count / sampleRate };
}
