/**
 * Content-addressed blob store: DATA_DIR/blobs/<sha[0:2]>/<sha256>. Bytes are
 * written to a temp file under DATA_DIR/tmp while being hashed and counted, then
 * renamed into place (atomic on one file system), so a reader never sees a
 * partial blob and identical bytes are stored once.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { RemoteBlobStore } from './s3-blobs.ts';
import { countStoreError, isDiskFailure, type StoreName } from './outages.ts';

const SHA256 = /^[0-9a-f]{64}$/;

/** A body that went over its size limit while being received. */
export class BlobTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`more than ${maxBytes} bytes`);
    this.name = 'BlobTooLargeError';
  }
}

/** Bytes received into a temp file, not yet in the store. */
export interface TempBlob {
  path: string;
  sha256: string;
  size: number;
  /** The first bytes (for content sniffing). */
  head: Buffer;
}

export function tmpDir(dataDir: string): string {
  return path.join(dataDir, 'tmp');
}

/** A fresh temp file path under DATA_DIR/tmp (the directory is created). */
export async function tempPath(dataDir: string, suffix = ''): Promise<string> {
  const dir = tmpDir(dataDir);
  await fsp.mkdir(dir, { recursive: true });
  return path.join(dir, `${crypto.randomBytes(12).toString('hex')}${suffix}`);
}

/** Temp files older than this are left over from a process that died (no generation or upload lives this long). */
export const STALE_TEMP_MS = 6 * 3600 * 1000;

/**
 * Removes temp files a killed process left in DATA_DIR/tmp (and its multipart
 * folder) that are older than `olderThanMs`; returns how many went. Files in use
 * by a live process are younger, so processes sharing DATA_DIR are safe.
 */
export async function sweepTemp(dataDir: string, olderThanMs = STALE_TEMP_MS, now = Date.now()): Promise<number> {
  let removed = 0;
  const dirs: Array<[string, number]> = [
    [tmpDir(dataDir), olderThanMs],
    [path.join(tmpDir(dataDir), 'multipart'), olderThanMs],
    [keptDir(dataDir), Math.max(olderThanMs, STALE_KEPT_MS)],
  ];
  for (const [dir, age] of dirs) {
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const file = path.join(dir, name);
      try {
        const stat = await fsp.stat(file);
        if (stat.isFile() && now - stat.mtimeMs > age) {
          await fsp.rm(file, { force: true });
          removed++;
        }
      } catch {
        /* gone meanwhile */
      }
    }
  }
  return removed;
}

/**
 * A fault-injection seam for tests: when set, every write of received or staged
 * bytes under DATA_DIR/tmp asks it first and fails with what it returns (an
 * ENOSPC error stands for a full disk, which a test cannot make for real).
 */
export const diskFaults: { write?: (file: string) => NodeJS.ErrnoException | undefined } = {};

/**
 * Outputs a worker made but could not store (the blob store or the database was
 * down): kept under DATA_DIR/tmp/kept by task and slot, so the next attempt
 * stores them instead of generating (or buying) them again. The sweep leaves
 * them for STALE_KEPT_MS, longer than any retry bound.
 */
export const STALE_KEPT_MS = 7 * 24 * 3600 * 1000;

const keptDir = (dataDir: string) => path.join(tmpDir(dataDir), 'kept');
const keptPrefix = (taskId: string, idx: number) => `${taskId.replace(/[^A-Za-z0-9_-]/g, '_')}.${idx}.`;

/** Keeps an output for a later attempt (a file is moved, bytes are written); its path, or undefined when it could not be kept. */
export async function keepOutput(
  dataDir: string,
  taskId: string,
  idx: number,
  output: { file: string } | { bytes: Buffer },
  mimeType: string,
): Promise<string | undefined> {
  const target = path.join(keptDir(dataDir), keptPrefix(taskId, idx) + Buffer.from(mimeType).toString('base64url'));
  try {
    await fsp.mkdir(keptDir(dataDir), { recursive: true });
    if ('file' in output) {
      if (output.file !== target) await fsp.rename(output.file, target);
    } else {
      await fsp.writeFile(target, output.bytes);
    }
    return target;
  } catch {
    await fsp.rm(target, { force: true }).catch(() => undefined);
    return undefined;
  }
}

/** The output kept for this slot by an earlier attempt, if any. */
export async function keptOutput(dataDir: string, taskId: string, idx: number): Promise<{ file: string; mimeType: string } | undefined> {
  const prefix = keptPrefix(taskId, idx);
  const name = (await fsp.readdir(keptDir(dataDir)).catch(() => [] as string[])).find((n) => n.startsWith(prefix));
  return name ? { file: path.join(keptDir(dataDir), name), mimeType: Buffer.from(name.slice(prefix.length), 'base64url').toString() } : undefined;
}

/** Which store blobs of this installation go to, as logs and metrics name it. */
export function blobStoreName(blobs: Blobs): StoreName {
  return blobs.remote ? 'object store' : 'local disk';
}

/** Where the blob with this SH-256 lives (whether or not it exists). */
export function blobPath(dataDir: string, sha256: string): string {
  if (!SHA256.test(sha256)) throw new Error(`not a sha256: ${sha256}`);
  return path.join(dataDir, 'blobs', sha256.slice(0, 2), sha256);
}

/**
 * Streams `source` into a temp file, hashing and counting as it goes; rejects
 * with BlobTooLargeError as soon as more than `maxBytes` arrived (the temp file
 * is removed and `source` is no longer read). Memory use is one chunk at a time.
 */
export async function receiveToTemp(dataDir: string, source: Readable, options: { maxBytes: number; headBytes?: number }): Promise<TempBlob> {
  const file = await tempPath(dataDir);
  const out = fs.createWriteStream(file, { flags: 'wx' });
  const hash = crypto.createHash('sha256');
  const headBytes = options.headBytes ?? 4100;
  const headChunks: Buffer[] = [];
  let headLength = 0;
  let size = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (error: unknown) => {
        source.off('data', onData);
        source.unpipe?.();
        source.pause();
        reject(error);
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > options.maxBytes) return fail(new BlobTooLargeError(options.maxBytes));
        const fault = diskFaults.write?.(file);
        if (fault) return fail(fault);
        hash.update(chunk);
        if (headLength < headBytes) {
          headChunks.push(chunk.subarray(0, headBytes - headLength));
          headLength += Math.min(chunk.length, headBytes - headLength);
        }
        // Backpressure: stop reading the socket until the disk caught up.
        if (!out.write(chunk)) {
          source.pause();
          out.once('drain', () => source.resume());
        }
      };
      source.on('data', onData);
      source.once('end', () => out.end(resolve));
      source.once('error', fail);
      source.once('aborted', () => fail(new Error('request aborted')));
      out.once('error', fail);
      source.resume();
    });
  } catch (error) {
    out.destroy();
    await fsp.rm(file, { force: true });
    if (isDiskFailure(error)) countStoreError('local disk', 'write temp', error);
    throw error;
  }
  return { path: file, sha256: hash.digest('hex'), size, head: Buffer.concat(headChunks) };
}

/** Moves a received temp file into the store (or drops it when the blob already exists). */
export async function commitTemp(blobs: Blobs, temp: TempBlob): Promise<string> {
  const remote = blobs.remote;
  if (remote) {
    try {
      if (!(await remote.has(temp.sha256))) await remote.putFile(temp.sha256, temp.path, temp.size);
    } finally {
      await fsp.rm(temp.path, { force: true });
    }
    return temp.sha256;
  }
  const target = blobPath(blobs.dataDir, temp.sha256);
  await fsp.mkdir(path.dirname(target), { recursive: true });
  try {
    await fsp.access(target);
    await fsp.rm(temp.path, { force: true });
  } catch {
    await fsp.rename(temp.path, target);
  }
  return target;
}

/** Stores a stream; see receiveToTemp for the size limit. */
export async function putBlobFromStream(blobs: Blobs, source: Readable, options: { maxBytes?: number } = {}): Promise<{ sha256: string; size: number }> {
  const temp = await receiveToTemp(blobs.dataDir, source, { maxBytes: options.maxBytes ?? Number.MAX_SAFE_INTEGER });
  await commitTemp(blobs, temp);
  return { sha256: temp.sha256, size: temp.size };
}

/** Stores bytes held in memory: hashed here, written once (to a temp file renamed into place) unless the blob exists. */
export async function putBlobFromBuffer(blobs: Blobs, bytes: Buffer): Promise<{ sha256: string; size: number }> {
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  const remote = blobs.remote;
  if (remote) {
    if (!(await remote.has(sha256))) await remote.putBuffer(sha256, bytes);
    return { sha256, size: bytes.length };
  }
  const target = blobPath(blobs.dataDir, sha256);
  try {
    await fsp.access(target);
  } catch {
    const temp = await tempPath(blobs.dataDir);
    const fault = diskFaults.write?.(temp);
    if (fault) throw fault;
    await fsp.writeFile(temp, bytes, { flag: 'wx' });
    await fsp.mkdir(path.dirname(target), { recursive: true });
    await fsp.rename(temp, target);
  }
  return { sha256, size: bytes.length };
}

/** Stores a copy of a file (the file itself is left where it is). */
export async function putBlobFromFile(blobs: Blobs, file: string): Promise<{ sha256: string; size: number }> {
  return putBlobFromStream(blobs, fs.createReadStream(file));
}

/** Bytes hashed and ready to go into the store: `commit` puts them (skipping a blob already there), `discard` drops what is left. */
export interface StagedBlob {
  sha256: string;
  size: number;
  commit(): Promise<unknown>;
  discard(): Promise<void>;
}

/** Hashes a file (copied to a temp file on the way) or bytes, before they are put: a writer pins the hash first (blob-pins.ts). */
export async function stageBlob(blobs: Blobs, source: string | Buffer): Promise<StagedBlob> {
  if (typeof source !== 'string') {
    const sha256 = crypto.createHash('sha256').update(source).digest('hex');
    return { sha256, size: source.length, commit: () => putBlobFromBuffer(blobs, source), discard: async () => undefined };
  }
  const temp = await receiveToTemp(blobs.dataDir, fs.createReadStream(source), { maxBytes: Number.MAX_SAFE_INTEGER });
  return { sha256: temp.sha256, size: temp.size, commit: () => commitTemp(blobs, temp), discard: () => fsp.rm(temp.path, { force: true }) };
}

/**
 * The blob store of an installation: its DATA_DIR/blobs directory, or the
 * remote store configured for it (BLOB_STORE=s3, checked at start-up by the
 * composition root). Built once per app or worker and passed to every blob
 * function below, so each follows its own installation's configuration.
 * Received bytes go through DATA_DIR/tmp on their way either way.
 */
export interface Blobs {
  readonly dataDir: string;
  readonly remote?: RemoteBlobStore;
}

/** The blob store in `dataDir` itself (no remote store). */
export function localBlobs(dataDir: string): Blobs {
  return { dataDir };
}

/** The blob's bytes as a stream, or undefined when the store does not hold it. */
export async function openBlob(blobs: Blobs, sha256: string): Promise<Readable | undefined> {
  const remote = blobs.remote;
  if (remote) return remote.get(sha256);
  const file = blobPath(blobs.dataDir, sha256);
  return fs.existsSync(file) ? fs.createReadStream(file) : undefined;
}

/**
 * A local file with the blob's bytes, for tools that read files (sharp, ffmpeg,
 * ffprobe): the stored file itself, or a temp copy of a remote blob that
 * `release` removes. Undefined when the store does not hold the blob.
 */
export async function localBlob(blobs: Blobs, sha256: string): Promise<{ path: string; release(): Promise<void> } | undefined> {
  const remote = blobs.remote;
  if (!remote) {
    const file = blobPath(blobs.dataDir, sha256);
    return fs.existsSync(file) ? { path: file, release: async () => undefined } : undefined;
  }
  const file = await tempPath(blobs.dataDir, '.blob');
  try {
    if (!(await remote.download(sha256, file))) {
      await fsp.rm(file, { force: true });
      return undefined;
    }
  } catch (error) {
    await fsp.rm(file, { force: true });
    throw error;
  }
  return { path: file, release: () => fsp.rm(file, { force: true }) };
}

/** Deletes a blob from the store (expired outputs no asset uses any more). */
export async function deleteBlob(blobs: Blobs, sha256: string): Promise<void> {
  const remote = blobs.remote;
  if (remote) await remote.delete(sha256);
  else await fsp.rm(blobPath(blobs.dataDir, sha256), { force: true });
}

/** Throws when the blob store cannot take writes (readiness). */
export async function checkBlobStore(blobs: Blobs): Promise<void> {
  const remote = blobs.remote;
  if (remote) return remote.check();
  const dir = path.join(blobs.dataDir, 'blobs');
  await fsp.mkdir(dir, { recursive: true });
  if (!(await fsp.stat(dir)).isDirectory()) throw new Error('the blob store is not a directory');
  await fsp.access(dir, fsp.constants.W_OK);
}

/**
 * Throws when DATA_DIR/tmp cannot take a received upload or a generated output:
 * not a writable directory, or less than `minFreeBytes` free on its file system.
 * With BLOB_STORE=s3 every byte still passes through it on its way to the bucket.
 */
export async function checkTempSpace(dataDir: string, minFreeBytes: number): Promise<void> {
  const dir = tmpDir(dataDir);
  await fsp.mkdir(dir, { recursive: true });
  if (!(await fsp.stat(dir)).isDirectory()) throw new Error('the temp directory is not a directory');
  await fsp.access(dir, fsp.constants.W_OK);
  const fsStat = await fsp.statfs(dir);
  const free = fsStat.bavail * fsStat.bsize;
  if (free < minFreeBytes) throw new Error(`the temp directory's file system has ${free} bytes free, under ${minFreeBytes}`);
}
