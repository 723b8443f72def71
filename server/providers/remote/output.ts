/**
 * Outputs of remote providers become ours: their bytes are written to a temp
 * file (base64 answers) or downloaded (URL answers) within a size limit, the
 * content is sniffed and must be media of the expected kind, and the MIME type
 * comes from the bytes, never from the upstream's headers. The worker then
 * stores the file in the blob store and measures it; an upstream URL or id
 * never reaches the client.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { sniff, type MediaFamily } from '../../media/sniff.ts';
import { MediaGenerationError, type GeneratedOutput, type MediaKind, type MediaTools } from '../media-types.ts';
import { callUpstream } from './http.ts';

/** The stored MIME type of a sniffed family for the expected kind ("isobmff" is video/mp4 or audio/mp4). */
const MIME: Record<MediaKind, Partial<Record<MediaFamily, string>>> = {
  image: { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' },
  video: { isobmff: 'video/mp4', webm: 'video/webm' },
  audio: { mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', isobmff: 'audio/mp4', aac: 'audio/aac', flac: 'audio/flac', webm: 'audio/webm' },
};

const ARTICLE: Record<MediaKind, string> = { image: 'an image', video: 'a video', audio: 'audio' };

/** The MIME type of media of the expected kind, from its first bytes; throws for anything else. */
function mimeOf(head: Buffer, kind: MediaKind, who: string): string {
  const family = sniff(head);
  const mime = family && MIME[kind][family];
  if (!mime) throw new MediaGenerationError('GENERATION_FAILED', `${who} returned something that is not ${ARTICLE[kind]}; nothing was charged for it.`);
  return mime;
}

/** Checks a written output file: media of the expected kind; returns its MIME type from the bytes. */
async function checkFile(file: string, kind: MediaKind, who: string): Promise<string> {
  const handle = await fsp.open(file, 'r');
  const head = Buffer.alloc(64);
  const { bytesRead } = await handle.read(head, 0, 64, 0).finally(() => handle.close());
  return mimeOf(head.subarray(0, bytesRead), kind, who);
}

function checkSize(bytes: Buffer, who: string, maxBytes: number): void {
  if (bytes.length > maxBytes) throw new MediaGenerationError('GENERATION_FAILED', `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`);
}

/** An image that came back as bytes (a base64 answer): checked and kept in memory, no temp file. */
export function imageBytes(bytes: Buffer, who: string, maxBytes: number): { bytes: Buffer; mimeType: string } {
  checkSize(bytes, who, maxBytes);
  return { bytes, mimeType: mimeOf(bytes.subarray(0, 64), 'image', who) };
}

/** An output that came back as a binary body, written to a temp file (audio and video are probed from files). */
export async function storeOutputBytes(bytes: Buffer, kind: MediaKind, tools: MediaTools, who: string, maxBytes: number): Promise<{ file: string; mimeType: string }> {
  checkSize(bytes, who, maxBytes);
  const mimeType = mimeOf(bytes.subarray(0, 64), kind, who);
  const file = await tools.tempFile('.remote');
  try {
    await fsp.writeFile(file, bytes);
    return { file, mimeType };
  } catch (error) {
    await fsp.rm(file, { force: true });
    throw error;
  }
}

/** Streams a response body to `file`, stopping past `maxBytes`. */
async function writeLimited(body: ReadableStream<Uint8Array>, file: string, maxBytes: number, who: string): Promise<void> {
  let seen = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > maxBytes) done(new MediaGenerationError('GENERATION_FAILED', `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`));
      else done(null, chunk);
    },
  });
  await pipeline(Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>), limit, fs.createWriteStream(file));
}

export interface DownloadOptions {
  who: string;
  maxBytes: number;
  deadlineMs: number;
  headers?: Record<string, string>;
}

/** An output the upstream answered with a URL: downloaded (retried like any read), checked, as a temp file. */
export async function downloadOutput(url: string, kind: MediaKind, tools: MediaTools, options: DownloadOptions): Promise<{ file: string; mimeType: string }> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an output address that is not a URL; nothing was charged for it.`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an output address that is not http(s); nothing was charged for it.`);
  }
  const response = await callUpstream((signal) => fetch(parsed, { headers: options.headers, signal, redirect: 'follow' }), {
    who: options.who,
    deadlineMs: options.deadlineMs,
    attemptTimeoutMs: options.deadlineMs,
    replayable: true,
    stopping: tools.stopping,
  });
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > options.maxBytes) {
    await response.body?.cancel();
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an output larger than ${options.maxBytes} bytes; nothing was charged for it.`);
  }
  if (!response.body) throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an empty output; nothing was charged for it.`);
  const file = await tools.tempFile('.remote');
  try {
    await writeLimited(response.body, file, options.maxBytes, options.who);
    return { file, mimeType: await checkFile(file, kind, options.who) };
  } catch (error) {
    await fsp.rm(file, { force: true });
    if (error instanceof MediaGenerationError) throw error;
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who}'s output could not be downloaded; nothing was charged for it.`);
  }
}

/** An output the upstream answered inline as a `data:` URL (`data:<type>;base64,<bytes>`): decoded, checked, as a temp file. */
export async function dataUrlOutput(url: string, kind: MediaKind, tools: MediaTools, who: string, maxBytes: number): Promise<{ file: string; mimeType: string }> {
  const comma = url.indexOf(',');
  // Base64 is 4 characters per 3 bytes: a longer text cannot fit the limit, and is not decoded.
  if (comma < 0 || (url.length - comma - 1) * 0.75 > maxBytes + 3) {
    throw new MediaGenerationError('GENERATION_FAILED', comma < 0 ? `${who} returned a malformed data URL; nothing was charged for it.` : `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`);
  }
  const meta = url.slice(5, comma);
  const text = url.slice(comma + 1);
  const bytes = /;base64$/i.test(meta) ? Buffer.from(text, 'base64') : Buffer.from(decodeURIComponent(text), 'latin1');
  return storeOutputBytes(bytes, kind, tools, who, maxBytes);
}
