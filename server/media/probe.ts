/**
 * Probing stored media: ffprobe for audio and video (format, duration, codecs,
 * dimensions), sharp for images (format, dimensions).
 */
import sharp from 'sharp';
import { runTool } from './run.ts';

export interface AvProbe {
  /** ffprobe's demuxer name list, e.g. `mov,mp4,m4a,3gp,3g2,mj2`. */
  formatName: string;
  durationSeconds: number | null;
  video: { codec: string; width: number; height: number } | null;
  audio: { codec: string; sampleRate: number | null; channels: number | null } | null;
}

interface FfprobeStream {
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  sample_rate?: string;
  channels?: number;
  duration?: string;
  disposition?: { attached_pic?: number };
}

interface FfprobeOutput {
  format?: { format_name?: string; duration?: string };
  streams?: FfprobeStream[];
}

const finite = (v: unknown): number | null => {
  const n = Number(v);
  return v !== undefined && v !== null && v !== '' && Number.isFinite(n) ? n : null;
};

/** Probes an audio or video file; rejects (ToolError) when ffprobe cannot read it. */
export async function probeAv(ffprobePath: string, file: string): Promise<AvProbe> {
  const stdout = await runTool(
    ffprobePath,
    ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file],
    { timeoutMs: 30_000, maxStdoutBytes: 4 * 1024 * 1024 },
  );
  const parsed = JSON.parse(stdout.toString('utf8')) as FfprobeOutput;
  const streams = parsed.streams ?? [];
  // Cover art in audio files is a "video" stream flagged attached_pic: not video.
  const v = streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
  const a = streams.find((s) => s.codec_type === 'audio');
  const duration = finite(parsed.format?.duration) ?? finite(a?.duration) ?? finite(v?.duration);
  return {
    formatName: parsed.format?.format_name ?? '',
    durationSeconds: duration === null ? null : Math.round(duration * 1000) / 1000,
    video: v ? { codec: v.codec_name ?? 'unknown', width: v.width ?? 0, height: v.height ?? 0 } : null,
    audio: a ? { codec: a.codec_name ?? 'unknown', sampleRate: finite(a.sample_rate), channels: a.channels ?? null } : null,
  };
}

export interface ImageProbe {
  /** sharp's format name: png, jpeg, webp, gif, … */
  format: string;
  width: number;
  height: number;
}

/** Reads image metadata (header only); rejects when the file is not a readable image. */
export async function probeImage(file: string): Promise<ImageProbe> {
  const meta = await sharp(file).metadata();
  if (!meta.format || !meta.width || !meta.height) throw new Error('no image dimensions');
  // Make sure the pixel data decodes too, not only the header (a truncated file fails here).
  await sharp(file, { animated: false }).stats();
  return { format: meta.format, width: meta.width, height: meta.height };
}
