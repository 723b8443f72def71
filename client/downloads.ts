/**
 * Node download helper: saves a task's successful outputs to a folder through
 * their signed URLs (no bearer key). Signed URLs expire; on a 403 the task is
 * read again once for fresh links.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { GemforgeClient, Task } from './client.ts';
import { ConnectionError, errorFromResponse } from './errors.ts';

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'video/quicktime': 'mov',
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/ogg': 'ogg',
  'audio/mp4': 'm4a',
  'audio/aac': 'aac',
  'audio/flac': 'flac',
  'audio/webm': 'weba',
};

export interface SavedOutput {
  index: number;
  assetId: string;
  mimeType: string;
  path: string;
  bytes: number;
}

export interface SaveResult {
  saved: SavedOutput[];
  /** Outputs without a downloadable asset (failed, expired, still pending), to report. */
  skipped: Array<{ index: number; status: string }>;
}

/** `task-id-0.png` style names; the extension follows the output's MIME type. */
export function outputFileName(taskId: string, index: number, mimeType: string): string {
  const bare = mimeType.split(';')[0].trim();
  return `${taskId}-${index}.${Object.hasOwn(EXTENSIONS, bare) ? EXTENSIONS[bare] : 'bin'}`;
}

async function fetchOutput(url: string, fetchImpl: typeof fetch, signal?: AbortSignal): Promise<Response> {
  let res: Response;
  try {
    res = await fetchImpl(url, { signal });
  } catch (cause) {
    throw new ConnectionError({ message: `Download failed: ${(cause as Error)?.message ?? cause}`, cause });
  }
  return res;
}

/**
 * Downloads every output that has an asset into `dir` (created if needed) and
 * returns where each went. `task` is a snapshot (from `tasks.wait`) or a task ID.
 */
export async function saveTaskOutputs(
  gf: Pick<GemforgeClient, 'tasks'>,
  task: Task | string,
  dir: string,
  options: { fetch?: typeof fetch; signal?: AbortSignal } = {},
): Promise<SaveResult> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  let snapshot = typeof task === 'string' ? await gf.tasks.get(task, options.signal) : task;
  await fs.promises.mkdir(dir, { recursive: true });
  const result: SaveResult = { saved: [], skipped: [] };
  let refreshed = false;
  for (const output of snapshot.outputs) {
    if (!output.asset) {
      result.skipped.push({ index: output.index, status: output.status });
      continue;
    }
    let asset = output.asset;
    let res = await fetchOutput(asset.url, fetchImpl, options.signal);
    if (res.status === 403 && !refreshed) {
      // Expired link: one fresh read of the task gives new signed URLs.
      await res.arrayBuffer().catch(() => undefined);
      refreshed = true;
      snapshot = await gf.tasks.get(snapshot.id, options.signal);
      asset = snapshot.outputs.find((o) => o.index === output.index)?.asset ?? asset;
      res = await fetchOutput(asset.url, fetchImpl, options.signal);
    }
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => '');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      throw errorFromResponse(res, body);
    }
    const file = path.join(dir, outputFileName(snapshot.id, output.index, asset.mimeType));
    const partial = `${file}.part`;
    await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>), fs.createWriteStream(partial));
    await fs.promises.rename(partial, file);
    result.saved.push({ index: output.index, assetId: asset.id, mimeType: asset.mimeType, path: file, bytes: (await fs.promises.stat(file)).size });
  }
  return result;
}
