/**
 * Media fixtures the tests make themselves (never downloaded): images with
 * sharp; video, tones, noise and silence with the npm-shipped ffmpeg; speech
 * with espeak-ng compiled to WebAssembly (npm `espeak-ng`, GPL-3.0-or-later,
 * a dev dependency used only here). Files go to one temp dir per process and
 * are memoised by name.
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { bundledFfprobePath } from '../../server/media/binaries.ts';
import { probeAv } from '../../server/media/probe.ts';
import { ffmpegWith, fixtureFiles } from './fixture-files.ts';

export { FFMPEG } from './fixture-files.ts';
export const FFPROBE = bundledFfprobePath();

const { memo } = fixtureFiles('gemforge-fixtures-');
const ffmpeg = ffmpegWith(120_000);

export type ImageFormat = 'png' | 'jpeg' | 'webp' | 'gif';

/** A small picture in the given format (gradient-ish so encoders have something to do). */
export function image(format: ImageFormat, width = 64, height = 48): Promise<string> {
  return memo(`image-${width}x${height}.${format}`, async (file) => {
    const raw = Buffer.alloc(width * height * 3);
    for (let i = 0; i < width * height; i++) {
      raw[i * 3] = (i * 7) % 256;
      raw[i * 3 + 1] = (i * 3) % 256;
      raw[i * 3 + 2] = 128;
    }
    await sharp(raw, { raw: { width, height, channels: 3 } })
      .toFormat(format)
      .toFile(file);
  });
}

export type VideoFormat = 'mp4' | 'webm' | 'mov';

/** One second of test pattern 160×120 with a tone track. */
export function video(format: VideoFormat, options: { audio?: boolean } = {}): Promise<string> {
  const audio = options.audio ?? true;
  return memo(`video-${audio ? 'av' : 'v'}.${format}`, async (file) => {
    const codecs =
      format === 'webm'
        ? ['-c:v', 'libvpx', '-b:v', '200k', ...(audio ? ['-c:a', 'libopus'] : [])]
        : ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', ...(audio ? ['-c:a', 'aac'] : [])];
    await ffmpeg([
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=160x120:rate=10:duration=1',
      ...(audio ? ['-f', 'lavfi', '-i', 'sine=frequency=440:duration=1'] : []),
      ...codecs,
      '-shortest',
      '-f',
      format,
      file,
    ]);
  });
}

export type AudioFormat = 'mp3' | 'wav' | 'ogg' | 'm4a' | 'aac' | 'flac' | 'webm';

const AUDIO_ENCODE: Record<AudioFormat, string[]> = {
  mp3: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'],
  wav: ['-c:a', 'pcm_s16le', '-f', 'wav'],
  ogg: ['-c:a', 'libvorbis', '-f', 'ogg'],
  m4a: ['-c:a', 'aac', '-b:a', '64k', '-f', 'ipod'],
  aac: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'],
  flac: ['-c:a', 'flac', '-f', 'flac'],
  webm: ['-c:a', 'libopus', '-f', 'webm'],
};

/** Re-encodes `input` (any audio ffmpeg reads) as `format`, audio only. */
export function encodeAudio(input: string, format: AudioFormat, name: string): Promise<string> {
  return memo(`${name}.${format}`, async (file) => {
    await ffmpeg(['-i', input, '-vn', '-ac', '1', '-ar', format === 'webm' ? '48000' : '22050', ...AUDIO_ENCODE[format], file]);
  });
}

/** An lavfi audio source rendered to WAV. */
function lavfiWav(name: string, source: string, seconds: number): Promise<string> {
  return memo(`${name}-${seconds}.wav`, async (file) => {
    await ffmpeg(['-f', 'lavfi', '-i', source, '-t', String(seconds), '-ac', '1', '-ar', '22050', '-c:a', 'pcm_s16le', file]);
  });
}

/** A steady sine tone. */
export const tone = (seconds: number, hz = 220) => lavfiWav(`tone-${hz}`, `sine=frequency=${hz}:sample_rate=22050`, seconds);
/** White or pink noise. */
export const noise = (seconds: number, color: 'white' | 'pink' = 'white') =>
  lavfiWav(`noise-${color}`, `anoisesrc=color=${color}:amplitude=0.3:sample_rate=22050`, seconds);
/** Digital silence. */
export const silence = (seconds: number) => lavfiWav('silence', 'anullsrc=r=22050:cl=mono', seconds);

/** A short tone in each audio format (for asset uploads). */
export async function audio(format: AudioFormat): Promise<string> {
  return encodeAudio(await tone(2, 440), format, 'tone-2s');
}

const SENTENCES = [
  'Hello, this is a reference recording for a voice profile.',
  'The quick brown fox jumps over the lazy dog, and then it runs far away.',
  'We are testing whether the service can tell real speech from silence, noise and tones.',
  'Every sentence here has a different rhythm, so the pitch rises and falls like a person speaking.',
  'Thank you for listening to this short message; have a pleasant afternoon.',
];

/**
 * Synthesised English speech of at least `seconds`, as a 22.05 kHz WAV made by
 * espeak-ng (WebAssembly). `pitch` is espeak's 0–99 pitch, `speed` words a minute.
 */
export function speech(seconds: number, options: { pitch?: number; speed?: number } = {}): Promise<string> {
  const pitch = options.pitch ?? 50;
  const speed = options.speed ?? 150;
  return memo(`speech-${seconds}-${pitch}-${speed}.wav`, async (file) => {
    // Roughly 2.5 words a second at 150 wpm: repeat sentences until long enough, then trim.
    const words = Math.ceil((seconds + 4) * (speed / 60));
    const text: string[] = [];
    for (let n = 0, i = 0; n < words; i++) {
      const s = SENTENCES[i % SENTENCES.length]!;
      text.push(s);
      n += s.split(' ').length;
    }
    const specifier = 'espeak-ng'; // untyped package: import by variable so tsc does not look for types
    const { default: ESpeakNg } = (await import(specifier)) as {
      default: (opts: { arguments: string[] }) => Promise<{ FS: { readFile(p: string): Uint8Array } }>;
    };
    const engine = await ESpeakNg({ arguments: ['-v', 'en-us', '-p', String(pitch), '-s', String(speed), '-w', '/speech.wav', text.join(' ')] });
    const untrimmed = `${file}.full.wav`;
    fs.writeFileSync(untrimmed, engine.FS.readFile('/speech.wav'));
    await ffmpeg(['-i', untrimmed, '-t', String(seconds), '-c:a', 'pcm_s16le', file]);
    fs.rmSync(untrimmed);
  });
}

/** Duration of a media file according to ffprobe. */
export async function durationOf(file: string): Promise<number> {
  const probe = await probeAv(FFPROBE, file);
  return probe.durationSeconds ?? NaN;
}

/**
 * A valid 16-bit mono WAV of exactly `totalBytes` bytes (silence), built in
 * memory: the cheapest valid media of an exact size for the 30 MiB boundary.
 */
export function wavOfSize(totalBytes: number, sampleRate = 16_000): Buffer {
  const dataBytes = totalBytes - 44;
  const buf = Buffer.alloc(totalBytes);
  buf.write('RIFF', 0, 'latin1');
  buf.writeUInt32LE(totalBytes - 8, 4);
  buf.write('WAVE', 8, 'latin1');
  buf.write('fmt ', 12, 'latin1');
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(sampleRate, 24);
  buf.writeUInt32LE(sampleRate * 2, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36, 'latin1');
  buf.writeUInt32LE(dataBytes, 40);
  return buf;
}

/**
 * A decompression bomb: a PNG of about 1 MB that declares 16000×16000 RGBA
 * (1 GB decoded), made by streaming zeros through sharp's encoder.
 */
export function pngBomb(): Promise<string> {
  return memo('bomb-16000x16000.png', async (file) => {
    const create = { width: 16_000, height: 16_000, channels: 4 as const, background: { r: 0, g: 0, b: 0, alpha: 1 } };
    await sharp({ create, limitInputPixels: false }).png({ compressionLevel: 9 }).toFile(file);
  });
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(body));
  return Buffer.concat([length, body, crc]);
}

/**
 * A PNG whose header declares `width`×`height` at `depth` bits of colour type
 * `colour` (6 = RGBA), interlaced or not, followed by a few rows of zeros only:
 * what a decoder would be asked to hold, without the test making it.
 */
export function pngHeaderOnly(width: number, height: number, options: { depth?: 8 | 16; colour?: number; interlaced?: boolean } = {}): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = options.depth ?? 8;
  ihdr[9] = options.colour ?? 6;
  ihdr[12] = options.interlaced ? 1 : 0;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', zlib.deflateSync(Buffer.alloc(4096))),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** One MJPEG frame of `width`×`height` in a QuickTime file. */
export function videoFrame(width: number, height: number): Promise<string> {
  return memo(`frame-${width}x${height}.mov`, async (file) => {
    await ffmpeg(['-f', 'lavfi', '-i', `color=size=${width}x${height}:d=0.04`, '-frames:v', '1', '-c:v', 'mjpeg', file]);
  });
}

/** One second of AAC audio in `streams` parallel streams (M4A). */
export function manyStreams(streams: number): Promise<string> {
  return memo(`streams-${streams}.m4a`, async (file) => {
    const maps = Array.from({ length: streams }, () => ['-map', '0:a']).flat();
    await ffmpeg(['-f', 'lavfi', '-i', 'sine=d=1', ...maps, '-c:a', 'aac', file]);
  });
}
