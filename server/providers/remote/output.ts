/**
 * Outputs of remote providers become ours: their bytes are written to a temp
 * file (base64 answers, binary bodies) or downloaded from a public address
 * (URL answers, public-fetch.ts), cut at a size limit while they arrive; the
 * content is sniffed and must be media of the expected kind, the MIME type
 * comes from the bytes, never from the upstream's headers, and the media is
 * held to the upload limits before anything decodes or converts it. The worker then
 * stores the file in the blob store and measures it; an upstream URL or id
 * never reaches the client.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { sniff, type MediaFamily } from '../../media/sniff.ts';
import { MediaGenerationError, type MediaKind, type MediaTools } from '../media-types.ts';
import { MediaLimitError } from '../../media/limits.ts';
import { probeAv, probeImage, type ImageProbe } from '../../media/probe.ts';
import { BodyTooLarge } from './body.ts';
import { callUpstream } from './http.ts';
import { AddressRefused, fetchPublic, type FetchAllow } from './public-fetch.ts';

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

/**
 * Holds a remote output to the limits uploads are held to (media/limits.ts:
 * pixels and side, decoded bytes, duration and streams, the decode gate),
 * measured from its header before anything decodes or converts it: a remote
 * PNG declaring 12000×12000 is refused here, not decoded. Returns the image's
 * probe (its cost at the decode gate, for a conversion). The slot fails as a
 * provider failure, nothing charged.
 */
export async function checkOutputMedia(source: string | Buffer, kind: MediaKind, tools: MediaTools, who: string): Promise<ImageProbe | undefined> {
  try {
    if (kind === 'image') return await probeImage(source);
    if (typeof source !== 'string') throw new Error('audio and video are probed from a file');
    await probeAv(tools.ffprobePath, source);
    return undefined;
  } catch (error) {
    if (error instanceof MediaLimitError)
      throw new MediaGenerationError(
        'GENERATION_FAILED',
        `${who} returned an output over this server's media limits (${error.message}); nothing was charged for it.`,
      );
    throw new MediaGenerationError('GENERATION_FAILED', `${who} returned ${ARTICLE[kind]} that could not be decoded; nothing was charged for it.`);
  }
}

/** An output written to a temp file, with an image's probe (for a conversion at the decode gate). */
export interface FileOutput {
  file: string;
  mimeType: string;
  probe: ImageProbe | undefined;
}

/** A written output file: sniffed as media of the kind (its MIME type from the bytes) and held to the media limits. */
export async function checkOutputFile(file: string, kind: MediaKind, tools: MediaTools, who: string): Promise<FileOutput> {
  const mimeType = await checkFile(file, kind, who);
  return { file, mimeType, probe: await checkOutputMedia(file, kind, tools, who) };
}

/**
 * An output that came back as a binary body (speech): streamed to a temp file
 * within `maxBytes` (never held whole in memory), sniffed, and held to the
 * media limits; audio and video are probed from files.
 */
export async function storeOutputBody(response: Response, kind: MediaKind, tools: MediaTools, who: string, maxBytes: number): Promise<FileOutput> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(who, maxBytes);
  }
  if (!response.body) throw new MediaGenerationError('GENERATION_FAILED', `${who} returned an empty output; nothing was charged for it.`);
  const file = await tools.tempFile('.remote');
  try {
    await writeLimited(response.body, file, maxBytes, who);
    return await checkOutputFile(file, kind, tools, who);
  } catch (error) {
    await fsp.rm(file, { force: true });
    if (error instanceof MediaGenerationError) throw error;
    throw new MediaGenerationError('GENERATION_FAILED', `${who}'s output could not be read; nothing was charged for it.`);
  }
}

/** Streams a response body to `file`, stopping past `maxBytes`. */
async function writeLimited(body: ReadableStream<Uint8Array>, file: string, maxBytes: number, who: string): Promise<void> {
  let seen = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > maxBytes) done(new BodyTooLarge(who, maxBytes));
      else done(null, chunk);
    },
  });
  await pipeline(Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>), limit, fs.createWriteStream(file));
}

export interface DownloadOptions {
  who: string;
  maxBytes: number;
  deadlineMs: number;
  /** Private addresses the operator allowed (`REMOTE_FETCH_ALLOW`); every other non-public address is refused. */
  allow: FetchAllow;
  headers?: Record<string, string>;
}

/**
 * An output the upstream answered with a URL: downloaded from a public (or
 * allowed) address only (public-fetch.ts), retried like any read, streamed to
 * a temp file within the size limit, sniffed and held to the media limits.
 */
export async function downloadOutput(url: string, kind: MediaKind, tools: MediaTools, options: DownloadOptions): Promise<FileOutput> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an output address that is not a URL; nothing was charged for it.`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new MediaGenerationError('GENERATION_FAILED', `${options.who} returned an output address that is not http(s); nothing was charged for it.`);
  }
  // A refused address ends the call as a stop would (no retry: asking again gives the same address).
  let refused: AddressRefused | undefined;
  const guarded = (signal: AbortSignal) =>
    fetchPublic(parsed, { ...(options.headers && { headers: options.headers }), signal }, options.allow).catch((error: unknown) => {
      if (error instanceof AddressRefused) refused = error;
      throw error;
    });
  let response: Response;
  try {
    response = await callUpstream(guarded, {
      who: options.who,
      errors: tools.upstreamErrors,
      deadlineMs: options.deadlineMs,
      attemptTimeoutMs: options.deadlineMs,
      replayable: true,
      stopping: () => tools.stopping() || refused !== undefined,
      signal: tools.signal,
    });
  } catch (error) {
    if (refused && !tools.stopping()) {
      tools.warn({ reason: refused.reason }, 'output address refused');
      throw new MediaGenerationError(
        'GENERATION_FAILED',
        `${options.who} returned an output address this server does not fetch: ${refused.reason}; nothing was charged for it.`,
      );
    }
    throw error;
  }
  return storeOutputBody(response, kind, tools, options.who, options.maxBytes);
}

/** An output the upstream answered inline as a `data:` URL (`data:<type>;base64,<bytes>`): decoded, checked, as a temp file. */
export async function dataUrlOutput(url: string, kind: MediaKind, tools: MediaTools, who: string, maxBytes: number): Promise<FileOutput> {
  const comma = url.indexOf(',');
  // Base64 is 4 characters per 3 bytes: a longer text cannot fit the limit, and is not decoded.
  if (comma < 0 || (url.length - comma - 1) * 0.75 > maxBytes + 3) {
    throw new MediaGenerationError(
      'GENERATION_FAILED',
      comma < 0
        ? `${who} returned a malformed data URL; nothing was charged for it.`
        : `${who} returned an output larger than ${maxBytes} bytes; nothing was charged for it.`,
    );
  }
  const meta = url.slice(5, comma);
  const text = url.slice(comma + 1);
  const bytes = /;base64$/i.test(meta) ? Buffer.from(text, 'base64') : Buffer.from(decodeURIComponent(text), 'latin1');
  if (bytes.length > maxBytes) throw new BodyTooLarge(who, maxBytes);
  // Written out and held to the same media limits as every other output.
  const file = await tools.tempFile('.remote');
  try {
    await fsp.writeFile(file, bytes);
    return await checkOutputFile(file, kind, tools, who);
  } catch (error) {
    await fsp.rm(file, { force: true });
    throw error;
  }
}
