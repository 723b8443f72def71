/**
 * POST /api/generate/assets: raw-bytes upload of reference media. The body is
 * never parsed or buffered: the handler streams it to disk (see
 * domain/assets.ts). A body over the limit answers 413 and closes the
 * connection, so the rest of it is never read.
 */
import { Router, type Request, type Response } from 'express';
import type { operations } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../http/context.ts';
import { MAX_ASSET_BYTES, payloadTooLarge, uploadAsset } from '../domain/assets.ts';
import { DomainError } from '../domain/errors.ts';
import { ASSETS_PATH } from '../http/upload-paths.ts';

type CreateAsset = operations['createAsset']['responses'][201]['content']['application/json'];

/**
 * Before express-openapi-validator: the validator checks a raw body only when
 * `req.body` holds one, and no parser may read this stream, so the body is
 * marked with an empty placeholder; the handler reads the real bytes.
 */
export function rawUploadPlaceholder(req: Request, _res: Response, next: () => void): void {
  if (req.method === 'POST' && req.body === undefined) req.body = Buffer.alloc(0);
  next();
}

/**
 * After a 413 the client may still be sending: answer, then close the
 * connection instead of draining up to gigabytes nobody will store.
 */
function closeAfterResponse(req: Request, res: Response): void {
  res.setHeader('connection', 'close');
  req.unpipe();
  res.once('finish', () => {
    // Node would now drain (read and discard) the rest of the body: stop reading
    // the socket instead, and give the client a moment to read the response
    // before the connection goes away.
    req.socket.pause();
    setTimeout(() => req.socket.destroy(), 200).unref();
  });
}

/**
 * A header value as the client meant it: Node hands header bytes over as
 * ISO-8859-1, so a UTF-8 name (what browsers and fetch send) arrives garbled;
 * read the bytes as UTF-8 when they are valid UTF-8, else keep ISO-8859-1.
 */
export function headerText(value: string | undefined): string | undefined {
  if (value === undefined || /^[\x00-\x7f]*$/.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return value;
  }
}

export function assetsRouter({ db, blobs, clock, config }: Pick<AppDeps, 'db' | 'blobs' | 'clock' | 'config'>): Router {
  const router = Router();
  router.post(ASSETS_PATH, async (req, res) => {
    const principal = principalOf(req);
    const declaredLength = Number(req.get('content-length') ?? NaN);
    if (Number.isFinite(declaredLength) && declaredLength > MAX_ASSET_BYTES) {
      closeAfterResponse(req, res);
      throw payloadTooLarge(MAX_ASSET_BYTES);
    }
    let asset;
    try {
      asset = await uploadAsset(
        db,
        clock,
        { blobs, ffprobePath: config.ffprobePath },
        {
          accountId: principal.account.id,
          contentType: req.get('content-type'),
          filename: headerText(req.get('x-filename')),
          body: req,
        },
      );
    } catch (error) {
      if (error instanceof DomainError && error.code === 'UPLOAD_TOO_LARGE') closeAfterResponse(req, res);
      throw error;
    }
    const body: CreateAsset = { asset: { id: asset.id, kind: asset.kind, state: asset.state, url: null } };
    res.status(201).json(body);
  });
  return router;
}
