/**
 * Node upload helpers: reference media from a file path, a Buffer or a stream
 * (raw bytes with the right Content-Type, guessed from the bytes' magic number
 * and the file extension when not given, plus X-Filename), and reference voices
 * as multipart. Uploads take no Idempotency-Key and are never retried
 * automatically (spec: "an ambiguous upload is not repeated automatically").
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Asset, GemforgeClient, Voice } from './client.ts';

/** Extensions of the media the service accepts, and their Content-Type. */
export const EXTENSION_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mov': 'video/quicktime',
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.ogg': 'audio/ogg',
  '.oga': 'audio/ogg',
  '.opus': 'audio/ogg',
  '.m4a': 'audio/mp4',
  '.aac': 'audio/aac',
  '.flac': 'audio/flac',
  '.weba': 'audio/webm',
};

const ascii = (b: Uint8Array, from: number, to: number) => String.fromCharCode(...b.subarray(from, to));

/** The Content-Type the first bytes of a file announce, if recognised. */
export function sniffContentType(head: Uint8Array): string | undefined {
  if (head.length < 4) return undefined;
  if (head[0] === 0x89 && ascii(head, 1, 4) === 'PNG') return 'image/png';
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (ascii(head, 0, 4) === 'GIF8') return 'image/gif';
  if (ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 12) === 'WEBP') return 'image/webp';
  if (ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 12) === 'WAVE') return 'audio/wav';
  if (ascii(head, 4, 8) === 'ftyp') {
    const brand = ascii(head, 8, 12);
    if (brand === 'qt  ') return 'video/quicktime';
    if (brand.startsWith('M4A') || brand.startsWith('M4B')) return 'audio/mp4';
    return 'video/mp4';
  }
  if (head[0] === 0x1a && head[1] === 0x45 && head[2] === 0xdf && head[3] === 0xa3) return 'video/webm';
  if (ascii(head, 0, 4) === 'OggS') return 'audio/ogg';
  if (ascii(head, 0, 4) === 'fLaC') return 'audio/flac';
  if (ascii(head, 0, 3) === 'ID3') return 'audio/mpeg';
  if (head[0] === 0xff && (head[1] & 0xf6) === 0xf0) return 'audio/aac'; // ADTS sync, layer 00
  if (head[0] === 0xff && (head[1] & 0xe0) === 0xe0) return 'audio/mpeg'; // MPEG audio frame sync
  return undefined;
}

const CONTAINERS = [
  ['video/mp4', 'audio/mp4', 'video/quicktime'],
  ['video/webm', 'audio/webm'],
];

/**
 * The bytes decide; the extension refines within one container (an `.m4a` is
 * `audio/mp4`, a `.weba` is `audio/webm`) and answers when the bytes say nothing.
 */
export function guessContentType(head: Uint8Array | undefined, filename?: string): string | undefined {
  const byMagic = head ? sniffContentType(head) : undefined;
  const ext = filename ? path.extname(filename).toLowerCase() : '';
  const byExt = Object.hasOwn(EXTENSION_TYPES, ext) ? EXTENSION_TYPES[ext] : undefined;
  if (byMagic && byExt && CONTAINERS.some((c) => c.includes(byMagic) && c.includes(byExt))) return byExt;
  return byMagic ?? byExt;
}

export interface UploadAssetOptions {
  contentType?: string;
  /** Sent as X-Filename; defaults to the base name of a path source. */
  filename?: string;
  signal?: AbortSignal;
}

async function readHead(file: string): Promise<Uint8Array> {
  const handle = await fs.promises.open(file, 'r');
  try {
    const buffer = Buffer.alloc(16);
    const { bytesRead } = await handle.read(buffer, 0, 16, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Reads the first bytes of a stream without losing them: the head, and a stream of everything. */
async function peek(stream: AsyncIterable<Uint8Array | string>): Promise<{ head: Uint8Array; body: ReadableStream<Uint8Array> }> {
  const iterator = stream[Symbol.asyncIterator]();
  const taken: Uint8Array[] = [];
  let size = 0;
  let ended = false;
  while (size < 16) {
    const next = await iterator.next();
    if (next.done) {
      ended = true;
      break;
    }
    const chunk = typeof next.value === 'string' ? Buffer.from(next.value) : next.value;
    taken.push(chunk);
    size += chunk.length;
  }
  async function* all(): AsyncGenerator<Uint8Array> {
    yield* taken;
    if (ended) return;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      yield typeof next.value === 'string' ? Buffer.from(next.value) : next.value;
    }
  }
  return { head: Buffer.concat(taken).subarray(0, 16), body: Readable.toWeb(Readable.from(all())) as ReadableStream<Uint8Array> };
}

/**
 * Uploads reference media and returns the asset (check `state === 'ready'`
 * before use). `source` is a file path, the bytes, or a readable stream.
 */
export async function uploadAsset(
  gf: Pick<GemforgeClient, 'assets'>,
  source: string | Uint8Array | AsyncIterable<Uint8Array | string>,
  options: UploadAssetOptions = {},
): Promise<Asset> {
  let filename = options.filename;
  let head: Uint8Array | undefined;
  let body: Blob | Uint8Array | ReadableStream<Uint8Array>;
  if (typeof source === 'string') {
    filename ??= path.basename(source);
    head = options.contentType ? undefined : await readHead(source);
    body = await fs.openAsBlob(source);
  } else if (source instanceof Uint8Array) {
    head = source.subarray(0, 16);
    body = source;
  } else {
    const peeked = await peek(source);
    head = peeked.head;
    body = peeked.body;
  }
  const contentType = options.contentType ?? guessContentType(head, filename);
  if (!contentType) {
    throw new TypeError(`Cannot tell the media type of ${filename ?? 'the upload'}; pass contentType (image/*, video/* or audio/*).`);
  }
  return gf.assets.upload(body, { contentType, filename, signal: options.signal });
}

/**
 * Uploads a private reference voice (multipart: file, duration, rightsConfirmed).
 * `rightsConfirmed: true` states that the speaker's permission is confirmed.
 */
export async function uploadVoice(
  gf: Pick<GemforgeClient, 'voices'>,
  source: string | Uint8Array,
  options: { duration: number | string; rightsConfirmed: true; filename?: string; contentType?: string; signal?: AbortSignal },
): Promise<Voice> {
  const filename = options.filename ?? (typeof source === 'string' ? path.basename(source) : 'voice');
  const head = typeof source === 'string' ? await readHead(source) : source.subarray(0, 16);
  const type = options.contentType ?? guessContentType(head, filename) ?? 'application/octet-stream';
  const file = typeof source === 'string' ? await fs.openAsBlob(source, { type }) : new Blob([new Uint8Array(source)], { type });
  return gf.voices.create({ file, filename, duration: options.duration, rightsConfirmed: options.rightsConfirmed, signal: options.signal });
}
