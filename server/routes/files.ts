/**
 * GET /files/{assetId}?expires=…&sig=…: downloads of task outputs through signed
 * URLs, without a bearer key. Outside the contract's API paths, so it is mounted
 * before the validator. A tampered or expired link gets the Error envelope, never bytes.
 */
import { Router } from 'express';
import type { AppDeps } from '../deps.ts';
import { ApiError } from '../http/api-error.ts';
import { openStoredAsset } from '../domain/assets.ts';

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/ogg': 'ogg',
  'audio/mp4': 'm4a',
};

export function filesRouter({ db, blobs, clock, signer }: Pick<AppDeps, 'db' | 'blobs' | 'clock' | 'signer'>): Router {
  const router = Router();
  router.get('/files/:assetId', async (req, res) => {
    const { assetId } = req.params;
    const q = req.query as Record<string, unknown>;
    const verdict = signer.verify(assetId, typeof q.expires === 'string' ? q.expires : undefined, typeof q.sig === 'string' ? q.sig : undefined, clock.now());
    if (verdict === 'invalid') throw new ApiError(403, 'INVALID_SIGNATURE', 'This download link is not valid.');
    if (verdict === 'expired') throw new ApiError(403, 'URL_EXPIRED', 'This download link has expired; read the task again for a fresh one.');
    // Streamed from the store (the local directory or S3-compatible storage): the link's checks stay the server's.
    const stored = await openStoredAsset(db, blobs, assetId);
    if (!stored) throw new ApiError(404, 'NOT_FOUND', 'This output is no longer stored.');
    const { asset, stream } = stored;
    res.setHeader('content-type', asset.mime_type);
    res.setHeader('content-length', String(asset.size_bytes));
    res.setHeader('cache-control', 'private, max-age=60');
    // The stored type is what the bytes were checked to be: a browser must not guess another.
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('content-disposition', `inline; filename="${asset.id}.${Object.hasOwn(EXTENSIONS, asset.mime_type) ? EXTENSIONS[asset.mime_type] : 'bin'}"`);
    if (req.method === 'HEAD') {
      stream.destroy();
      res.status(200).end();
      return;
    }
    await new Promise<void>((resolve, reject) => {
      stream.on('error', reject);
      res.on('close', resolve);
      stream.pipe(res);
    });
  });
  return router;
}
