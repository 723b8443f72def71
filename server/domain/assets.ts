/**
 * Reference media assets: upload (stream → temp file → sniff → probe → blob
 * store → row), the usability check later generation requests make, and task
 * outputs stored as assets.
 */
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Db, Tx } from '../storage/db.ts';
import * as store from '../storage/assets.ts';
import type { AssetKind, AssetRow } from '../storage/assets.ts';
import {
  BlobTooLargeError,
  blobStoreName,
  commitTemp,
  localBlob,
  openBlob,
  receiveToTemp,
  stageBlob,
  type Blobs,
  type StagedBlob,
  type TempBlob,
} from '../storage/blobs.ts';
import { isDatabaseFailure, isDiskFailure, storeFailed, StoreUnavailableError } from '../storage/outages.ts';
import { storeReferenced } from '../storage/blob-pins.ts';
import { DomainError, invalidRequest } from './errors.ts';
import { FAMILY_NAMES, sniff, SUPPORTED_MIMES, supportedType, type MediaFamily, type SupportedType } from '../media/sniff.ts';
import { probeAv, probeImage } from '../media/probe.ts';
import { checkDimensions, MAX_MEDIA_SECONDS, MediaLimitError } from '../media/limits.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';
import type { UrlSigner } from './signing.ts';

export type { AssetKind, AssetRow };
export { isDatabaseFailure, isDiskFailure, storeFailed, StoreUnavailableError };

/** 30 MiB: the spec's asset upload limit (exactly this many bytes passes). */
export const MAX_ASSET_BYTES = 30 * 1024 * 1024;
/** X-Filename is truncated (not rejected) beyond this many characters. */
export const MAX_FILENAME_CHARS = 255;

export interface MediaTools {
  /** The installation's blob store (its temp files are under its DATA_DIR). */
  blobs: Blobs;
  ffprobePath: string;
}

export interface UploadInput {
  accountId: string;
  contentType: string | undefined;
  filename: string | undefined;
  body: Readable;
}

/**
 * Bidirectional controls (U+202A–E, U+2066–9, U+200E/F, U+061C): a name holding them shows
 * reversed ("invoice‮fdp.exe" reads as "invoiceexe.pdf"), so they are dropped from names.
 */
export const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;

/** Drops bidirectional controls, then truncates to 255 characters without splitting a surrogate pair. */
export function truncateFilename(raw: string | undefined): string | null {
  const name = raw?.replace(BIDI_CONTROLS, '');
  if (name === undefined || name === '') return null;
  const chars = Array.from(name);
  return chars.length <= MAX_FILENAME_CHARS ? name : chars.slice(0, MAX_FILENAME_CHARS).join('');
}

export function payloadTooLarge(limit: number): DomainError {
  return new DomainError('UPLOAD_TOO_LARGE', `The upload is larger than ${limit} bytes (${limit / 1024 / 1024} MiB).`);
}

/** What probing found, in row columns. */
type Probed = Pick<AssetRow, 'width' | 'height' | 'duration_seconds' | 'video_codec' | 'audio_codec' | 'has_audio'>;

const SHARP_FORMATS: Partial<Record<MediaFamily, string>> = { png: 'png', jpeg: 'jpeg', webp: 'webp', gif: 'gif' };

/** Demuxer names ffprobe reports for each audio/video family. */
const DEMUXERS: Partial<Record<MediaFamily, RegExp>> = {
  isobmff: /mov|mp4/,
  webm: /matroska|webm/,
  mp3: /^mp3$/,
  wav: /^wav$/,
  ogg: /^ogg$/,
  aac: /^aac$/,
  flac: /^flac$/,
};

/**
 * A probe failure handler: media over a limit of media/limits.ts is refused
 * with 422 INVALID_REQUEST naming the limit; any other failure becomes `fallback`
 * (the caller's own "could not be decoded").
 */
export function overLimitOr<T>(fallback: T): (error: unknown) => T {
  return (error) => {
    if (error instanceof MediaLimitError) throw invalidRequest(error.message);
    return fallback;
  };
}

/**
 * Checks a stored file against its declared type by probing it, and returns the
 * metadata to store. Throws 422 INVALID_REQUEST when it does not decode as that type.
 */
export async function probeAs(tools: MediaTools, file: string | Buffer, type: SupportedType): Promise<Probed> {
  const what = `${FAMILY_NAMES[type.family]} (${type.mime})`;
  if (type.kind === 'image') {
    const image = await probeImage(file).catch(overLimitOr(undefined));
    if (!image || image.format !== SHARP_FORMATS[type.family]) throw invalidRequest(`The body could not be decoded as a ${what}.`);
    return { width: image.width, height: image.height, duration_seconds: null, video_codec: null, audio_codec: null, has_audio: null };
  }
  if (typeof file !== 'string') throw new Error('audio and video are probed from a file');
  const av = await probeAv(tools.ffprobePath, file).catch(overLimitOr(undefined));
  if (!av || !DEMUXERS[type.family]!.test(av.formatName)) throw invalidRequest(`The body could not be decoded as ${what}.`);
  if (type.kind === 'video' && !av.video) throw invalidRequest(`The body has no video stream; it is not a ${type.mime} video.`);
  if (type.kind === 'audio' && av.video) {
    throw invalidRequest(`The body has a video stream; upload it as video/${type.family === 'isobmff' ? 'mp4' : 'webm'}, not ${type.mime}.`);
  }
  if (type.kind === 'audio' && !av.audio) throw invalidRequest(`The body has no audio stream; it is not ${what}.`);
  return {
    width: av.video?.width ?? null,
    height: av.video?.height ?? null,
    duration_seconds: av.durationSeconds,
    video_codec: av.video?.codec ?? null,
    audio_codec: av.audio?.codec ?? null,
    has_audio: av.audio !== null,
  };
}

/** Rejects a body whose first bytes are not the declared type (or nothing at all). */
export function checkSniffed(head: Buffer, size: number, type: SupportedType): void {
  if (size === 0) throw invalidRequest('The body is empty: send the file bytes (1 byte to 30 MiB).');
  const found = sniff(head);
  if (!found) throw invalidRequest(`The body is not a supported media file (declared ${type.mime}; its bytes match no supported format).`);
  if (found !== type.family) {
    throw invalidRequest(`The body is a ${FAMILY_NAMES[found]} file, which does not match the declared Content-Type ${type.mime}.`);
  }
}

/** 422 for a Content-Type an asset upload does not take, naming the ones it does. */
export function unsupportedUploadType(contentType: string | undefined): DomainError {
  return invalidRequest(`Unsupported Content-Type "${contentType ?? ''}" for an asset upload; send one of ${SUPPORTED_MIMES.join(', ')}.`);
}

/** Resolves the declared Content-Type to a supported type or throws 422. */
export function requireSupportedType(contentType: string | undefined): SupportedType {
  const type = supportedType(contentType);
  if (!type) throw unsupportedUploadType(contentType);
  return type;
}

/**
 * Handles one upload: streams the body to disk (413 beyond 30 MiB, checked
 * while streaming), checks its bytes against the declared type, probes it, stores
 * the blob and the row. The asset is `ready` when this returns.
 */
export async function uploadAsset(db: Db, clock: Clock, tools: MediaTools, input: UploadInput): Promise<AssetRow> {
  const type = requireSupportedType(input.contentType);
  let temp: TempBlob;
  try {
    temp = await receiveToTemp(tools.blobs.dataDir, input.body, { maxBytes: MAX_ASSET_BYTES });
  } catch (error) {
    if (error instanceof BlobTooLargeError) throw payloadTooLarge(MAX_ASSET_BYTES);
    throw error;
  }
  try {
    checkSniffed(temp.head, temp.size, type);
    const probed = await probeAs(tools, temp.path, type);
    const row: AssetRow = {
      id: newId('asset'),
      account_id: input.accountId,
      kind: type.kind,
      mime_type: type.mime,
      state: 'ready',
      size_bytes: temp.size,
      blob_sha256: temp.sha256,
      filename: truncateFilename(input.filename),
      ...probed,
      origin: 'upload',
      task_id: null,
      expires_at: null,
      deleted_at: null,
      created_at: clock.now().toISOString(),
    };
    await storeReferenced(
      db,
      temp.sha256,
      clock.now(),
      () => commitTemp(tools.blobs, temp),
      (trx) => store.insertAsset(trx, row),
    );
    return row;
  } finally {
    await fsp.rm(temp.path, { force: true });
  }
}

const KIND_WORDS: Record<AssetKind, string> = { image: 'an image', video: 'a video', audio: 'an audio' };

/**
 * The reference check generation requests make: returns the asset row when it
 * is owned by `accountId`, not deleted, of one of `kinds` (when given) and ready.
 * Throws 422 INVALID_REFERENCE (unknown, deleted, another account's, wrong kind)
 * or 409 REFERENCES_PROCESSING (not ready yet).
 */
export async function requireUsableAsset(db: Db, accountId: string, assetId: string, kinds?: AssetKind[]): Promise<AssetRow> {
  const row = await store.findAsset(db, assetId);
  const expected = kinds && kinds.length > 0 ? `${kinds.map((k) => KIND_WORDS[k]).join(' or ')} asset` : 'an asset';
  if (!row || row.account_id !== accountId || row.deleted_at || row.state === 'failed') {
    throw new DomainError('INVALID_REFERENCE', `Reference asset ${assetId} is not usable: expected ${expected} owned by this account.`);
  }
  if (kinds && kinds.length > 0 && !kinds.includes(row.kind)) {
    throw new DomainError('INVALID_REFERENCE', `Reference asset ${assetId} is ${KIND_WORDS[row.kind]} asset; expected ${expected}.`);
  }
  if (row.state !== 'ready') {
    throw new DomainError('REFERENCES_PROCESSING', `Reference asset ${assetId} is still processing; retry when it is ready.`);
  }
  const overLimit = limitProblem(row);
  if (overLimit) throw new DomainError('INVALID_REFERENCE', `Reference asset ${assetId} is over the media limits: ${overLimit}`);
  return row;
}

/**
 * What makes a stored asset too large to decode, from the dimensions and
 * duration measured at upload (assets stored before the limits existed may be
 * over them; new ones never are), or undefined.
 */
function limitProblem(row: AssetRow): string | undefined {
  try {
    if (row.width !== null && row.height !== null && row.kind !== 'audio') checkDimensions(row.kind, row.width, row.height);
  } catch (error) {
    if (error instanceof MediaLimitError) return error.message;
    throw error;
  }
  if (row.duration_seconds !== null && row.duration_seconds > MAX_MEDIA_SECONDS) {
    return `it is ${Math.round(row.duration_seconds)} s long; the limit is ${MAX_MEDIA_SECONDS} s.`;
  }
  return undefined;
}

export interface OutputAssetInput {
  accountId: string;
  taskId: string;
  /** The produced file, copied into the blob store (the caller removes it); or the bytes themselves. */
  output: { file: string } | { bytes: Buffer };
  /** Canonical MIME type of the output (image/png, video/mp4, audio/mpeg, …). */
  mimeType: string;
  /** When the stored output may be removed (output storage is not permanent). */
  expiresAt: Date | null;
  /** Probe the file for dimensions/duration/codecs (default true). */
  probe?: boolean;
  /** Writes made in the same transaction as the asset row (the task output pointing at it: one commit, not two). */
  alongside?: (trx: Tx, asset: AssetRow) => Promise<void>;
}

/** Stores a task's output file as a ready asset of that account (origin `output`). */
export async function createOutputAsset(db: Db, clock: Clock, tools: MediaTools, input: OutputAssetInput): Promise<AssetRow> {
  const type = supportedType(input.mimeType);
  if (!type) throw new Error(`unsupported output type ${input.mimeType}`);
  const source = 'bytes' in input.output ? input.output.bytes : input.output.file;
  const probed: Probed =
    input.probe === false
      ? { width: null, height: null, duration_seconds: null, video_codec: null, audio_codec: null, has_audio: null }
      : await probeAs(tools, source, type);
  // A store that fails (full disk, object store or database unreachable) is a StoreUnavailableError naming it:
  // the worker keeps the output and tries again later; anything else is the output's own fault.
  let staged: StagedBlob;
  try {
    staged = await stageBlob(tools.blobs, source);
  } catch (error) {
    throw isDiskFailure(error) ? storeFailed('local disk', 'stage output', error) : error;
  }
  const blobStore = blobStoreName(tools.blobs);
  const put = () =>
    staged.commit().catch((error: unknown) => {
      throw blobStore === 'object store' || isDiskFailure(error) ? storeFailed(blobStore, 'put output', error) : error;
    });
  const row: AssetRow = {
    id: newId('asset'),
    account_id: input.accountId,
    kind: type.kind,
    mime_type: type.mime,
    state: 'ready',
    size_bytes: staged.size,
    blob_sha256: staged.sha256,
    filename: null,
    ...probed,
    origin: 'output',
    task_id: input.taskId,
    expires_at: input.expiresAt ? input.expiresAt.toISOString() : null,
    deleted_at: null,
    created_at: clock.now().toISOString(),
  };
  try {
    await storeReferenced(db, staged.sha256, clock.now(), put, async (trx) => {
      await store.insertAsset(trx, row);
      await input.alongside?.(trx, row);
    });
  } catch (error) {
    throw !(error instanceof StoreUnavailableError) && isDatabaseFailure(error) ? storeFailed('database', 'store output', error) : error;
  } finally {
    await staged.discard();
  }
  return row;
}

/**
 * A stored asset's bytes for a signed download (routes/files.ts): the asset and a
 * stream of its blob from the store (local directory or S3-compatible), or
 * undefined when the asset is unknown, deleted, or its bytes are gone.
 */
export async function openStoredAsset(db: Db, blobs: Blobs, assetId: string): Promise<{ asset: AssetRow; stream: Readable } | undefined> {
  const asset = await store.findAsset(db, assetId);
  const stream = asset && !asset.deleted_at ? await openBlob(blobs, asset.blob_sha256) : undefined;
  return asset && stream ? { asset, stream } : undefined;
}

/**
 * A signed link under `baseUrl` to an asset of the account, for a remote
 * provider's upstream to fetch (a source image sent to a prediction model);
 * undefined when the asset is not the account's any more or was deleted.
 */
export async function assetLink(db: Db, signer: UrlSigner, baseUrl: string, now: Date, accountId: string, assetId: string): Promise<string | undefined> {
  const asset = await store.findAsset(db, assetId);
  if (!asset || asset.account_id !== accountId || asset.deleted_at) return undefined;
  return signer.sign(baseUrl, assetId, now);
}

/**
 * The file of a reference a job reads: the stored file, or a temp copy of a blob
 * in object storage (`release` removes it when the job is done); undefined when
 * the asset is not the account's any more, was deleted, or its bytes are gone.
 */
export async function referenceFile(
  db: Db,
  blobs: Blobs,
  accountId: string,
  assetId: string,
): Promise<{ path: string; release: () => Promise<void> } | undefined> {
  const asset = await store.findAsset(db, assetId);
  if (!asset || asset.account_id !== accountId || asset.deleted_at) return undefined;
  return localBlob(blobs, asset.blob_sha256);
}
