/**
 * Probing stored media: ffprobe for audio and video (format, duration, codecs,
 * dimensions), sharp for images (format, dimensions), within the limits of
 * limits.ts: measured from the header first, decoded only when under them.
 */
import fsp from 'node:fs/promises';
import { sharp } from './sharp.ts';
import { runTool } from './run.ts';
import { checkDimensions, Gate, MAX_MEDIA_SECONDS, MAX_MEDIA_STREAMS, MAX_WHOLE_FRAME_BYTES, MediaLimitError, SHARP_INPUT } from './limits.ts';

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

/** ffprobe runs at once (per process): each reads headers and a few megabytes of the file. */
const probes = new Gate(4);

/**
 * Probes an audio or video file; rejects (ToolError) when ffprobe cannot read it,
 * and with MediaLimitError when it is longer, larger or has more streams than
 * the limits allow. ffprobe reads at most 10 MB and 10 s of the file to find its
 * streams, within 30 s of wall time.
 */
export async function probeAv(ffprobePath: string, file: string): Promise<AvProbe> {
  const stdout = await probes.run(1, () =>
    runTool(ffprobePath, ['-v', 'error', '-probesize', '10M', '-analyzeduration', '10M', '-print_format', 'json', '-show_format', '-show_streams', file], {
      timeoutMs: 30_000,
      maxStdoutBytes: 4 * 1024 * 1024,
    }),
  );
  const parsed = JSON.parse(stdout.toString('utf8')) as FfprobeOutput;
  const streams = parsed.streams ?? [];
  if (streams.length > MAX_MEDIA_STREAMS) {
    throw new MediaLimitError(`The file has ${streams.length} streams; the limit is ${MAX_MEDIA_STREAMS}.`);
  }
  // Cover art in audio files is a "video" stream flagged attached_pic: not video.
  const v = streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
  const a = streams.find((s) => s.codec_type === 'audio');
  if (/\bwav\b/.test(parsed.format?.format_name ?? '')) await checkWavLength(file);
  const duration = finite(parsed.format?.duration) ?? finite(a?.duration) ?? finite(v?.duration);
  if (duration !== null && duration > MAX_MEDIA_SECONDS) {
    throw new MediaLimitError(`The file is ${Math.round(duration)} s long; the limit is ${MAX_MEDIA_SECONDS} s.`);
  }
  if (v) checkDimensions('video', v.width ?? 0, v.height ?? 0);
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
  /** Decoding memory this image is counted for at the decode gate (see `decodeGated`). */
  decodeCost: number;
}

/** Decoding memory a streamed (line-by-line) decode is counted for in the gate. */
const STREAMED_DECODE_BYTES = MAX_WHOLE_FRAME_BYTES / 4;
/** At most one decode at the whole-frame limit, or four streamed ones, at a time (per process). */
const decodes = new Gate(MAX_WHOLE_FRAME_BYTES);

const SAMPLE_BYTES: Record<string, number> = { uchar: 1, char: 1, ushort: 2, short: 2, uint: 4, int: 4, float: 4, complex: 8, double: 8, dpcomplex: 16 };

/**
 * Reads an image's header, refuses it over the limits (MediaLimitError, before
 * any pixel is decoded), then makes sure its pixel data decodes too (a truncated
 * file fails here). The decode streams where the format allows it (a downscale
 * over a sequential read holds a few lines, not the frame) and waits its turn at
 * a gate on decoding memory; libvips refuses more than the pixel limit itself.
 * Rejects (not a MediaLimitError) when the file is not a readable image.
 */
export async function probeImage(file: string | Buffer): Promise<ImageProbe> {
  // The header only (no pixel is decoded), read without libvips' own limit so the refusal can name ours.
  const meta = await sharp(file, { limitInputPixels: false })
    .metadata()
    .catch(() => undefined);
  if (!meta?.format || !meta.width || !meta.height) throw new Error('no image dimensions');
  // A multi-page image's height is the first page's unless `pages` was asked for.
  const { width, height } = meta;
  checkDimensions('image', width, height);
  const wholeFrame = meta.isProgressive === true || meta.format === 'webp' || meta.format === 'gif';
  const frameBytes = width * height * (meta.channels ?? 4) * (SAMPLE_BYTES[meta.depth ?? 'uchar'] ?? 1);
  if (wholeFrame && frameBytes > MAX_WHOLE_FRAME_BYTES) {
    throw new MediaLimitError(
      `The image (${width}×${height}, ${meta.isProgressive ? 'interlaced or progressive' : meta.format}) would take ${Math.ceil(frameBytes / 1024 / 1024)} MiB to decode; the limit for images decoded whole is ${MAX_WHOLE_FRAME_BYTES / 1024 / 1024} MiB.`,
    );
  }
  const decodeCost = wholeFrame ? Math.max(frameBytes, STREAMED_DECODE_BYTES) : STREAMED_DECODE_BYTES;
  await decodes.run(decodeCost, () =>
    // The default (Lanczos) downscale reads every line; a nearest-neighbour one can stop
    // early and miss a truncated tail.
    sharp(file, { ...SHARP_INPUT, animated: false })
      .resize(8, 8, { fit: 'fill' })
      .raw()
      .toBuffer(),
  );
  return { format: meta.format, width, height, decodeCost };
}

/**
 * Runs a decode of an image `probeImage` passed (a format conversion) at the
 * same gate on decoding memory, so conversions and uploads share one budget.
 */
export function decodeGated<T>(image: Pick<ImageProbe, 'decodeCost'>, fn: () => Promise<T>): Promise<T> {
  return decodes.run(image.decodeCost, fn);
}

/** `data` sizes that mean "length unknown" (written by streaming tools before they know it). */
const UNKNOWN_WAV_SIZES = new Set([0, 0xffffffff]);

/**
 * Refuses a WAV whose header claims more audio than the file holds (MediaLimitError): a
 * player trusts the header, so a 1 s file claiming 10 h would be stored and served as 10 h.
 * Reads the RIFF chunks up to `data` from the first 64 KiB.
 */
export async function checkWavLength(file: string): Promise<void> {
  const handle = await fsp.open(file, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    await handle.read(head, 0, head.length, 0);
    if (head.length < 12 || head.toString('latin1', 0, 4) !== 'RIFF' || head.toString('latin1', 8, 12) !== 'WAVE') return;
    for (let at = 12; at + 8 <= head.length;) {
      const id = head.toString('latin1', at, at + 4);
      const length = head.readUInt32LE(at + 4);
      if (id === 'data') {
        const held = size - (at + 8);
        if (!UNKNOWN_WAV_SIZES.has(length) && length > held) {
          throw new MediaLimitError(`The WAV header declares ${length} bytes of audio, but the file holds ${held}: it is truncated or its header is wrong.`);
        }
        return;
      }
      at += 8 + length + (length % 2); // chunks are padded to an even length
    }
  } finally {
    await handle.close();
  }
}
