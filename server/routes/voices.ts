/**
 * GET /api/generate/voices (list) and POST /api/generate/voices (multipart
 * upload of a private reference voice). The multipart body is parsed by
 * express-openapi-validator's own fileUploader (multer, files on disk under
 * DATA_DIR/tmp/multipart, removed when the response closes).
 */
import fs from 'node:fs';
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { operations } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../http/context.ts';
import { moderationDeps, screenTexts } from '../http/policy.ts';
import { createVoice, describeVoice, listVoices, MAX_VOICE_FILE_BYTES, voicesOfModel } from '../domain/voices.ts';
import { providerVoices } from '../domain/media-request.ts';
import { transcriberFor } from '../media/transcription.ts';
import { ApiError } from '../http/api-error.ts';
import { DomainError, invalidRequest } from '../domain/errors.ts';
import { VOICES_PATH } from '../http/upload-paths.ts';

type ListVoices = operations['listVoices']['responses'][200]['content']['application/json'];
type CreateVoice = operations['createVoice']['responses'][201]['content']['application/json'];

/** multer limits for the voice upload: one file of at most 50 MiB, a handful of text fields. */
export const VOICE_UPLOAD_LIMITS = { fileSize: MAX_VOICE_FILE_BYTES, files: 1, fields: 10, parts: 12 };

interface UploadedFile {
  fieldname: string;
  originalname: string;
  size: number;
  path: string;
}

const filesOf = (req: Request): UploadedFile[] => {
  const files = (req as Request & { files?: unknown }).files;
  return Array.isArray(files) ? files : [];
};

/**
 * Before the validator: whatever happens, multer's temp files go when the
 * response closes. A body cut off mid-file leaves multer's file entry without a
 * path (multer removed the partial file itself), so only real paths are removed.
 */
export function voiceUploadCleanup(req: Request, res: Response, next: NextFunction): void {
  if (req.method === 'POST') {
    res.once('close', () => {
      for (const f of filesOf(req)) {
        if (typeof f?.path === 'string' && f.path) fs.rm(f.path, { force: true }, () => {});
      }
    });
  }
  next();
}

/** multer's limit errors arrive as 400/413 with its own wording; give them the spec's statuses and clear messages. */
export function voiceUploadErrors(err: unknown, req: Request, _res: Response, next: NextFunction): void {
  const e = err as { status?: number; message?: string } | undefined;
  if (req.path !== VOICES_PATH || req.method !== 'POST' || !e || err instanceof ApiError || err instanceof DomainError) return next(err);
  const message = e.message ?? '';
  if (/File too large/i.test(message)) {
    return next(new ApiError(413, 'INVALID_REQUEST', `file is larger than ${MAX_VOICE_FILE_BYTES} bytes (50 MiB).`));
  }
  if (/Too many files/i.test(message)) return next(invalidRequest('Exactly one file part, named "file", is allowed.'));
  if (/Too many (fields|parts)|Unexpected field|Field (name|value) too long/i.test(message)) {
    return next(invalidRequest(`Only the fields file, duration and rightsConfirmed are allowed (${message}).`));
  }
  // busboy's words for a multipart body that is cut off or malformed.
  if (
    /multipart|boundary|Unexpected end of (form|file)|Malformed part header|Part terminated early/i.test(message) &&
    (e.status === undefined || e.status === 400 || e.status === 500)
  ) {
    return next(invalidRequest('The body must be multipart/form-data with the fields file, duration and rightsConfirmed.'));
  }
  next(err);
}

export function voicesRouter(deps: Pick<AppDeps, 'db' | 'blobs' | 'clock' | 'config' | 'policies' | 'catalog' | 'mediaProviders'>): Router {
  const { db, clock, config, catalog, mediaProviders } = deps;
  const router = Router();
  const transcriber = transcriberFor(config);
  const moderation = moderationDeps(deps);

  router.get(VOICES_PATH, async (req, res) => {
    const principal = principalOf(req);
    const q = req.query as { scope?: string; page?: string | number; language?: string; model?: string };
    const body: ListVoices = await listVoices(db, principal.account.id, {
      scope: q.scope === 'explore' ? 'explore' : 'mine',
      page: q.page === undefined ? 1 : Number(q.page),
      language: q.language,
      ids: q.model === undefined ? undefined : voicesOfModel(catalog, q.model, (m) => providerVoices(mediaProviders, m)),
    });
    res.status(200).json(body);
  });

  router.post(VOICES_PATH, async (req, res) => {
    const principal = principalOf(req);
    const files = filesOf(req);
    const file = files.find((f) => f.fieldname === 'file');
    if (!file || files.length !== 1) throw invalidRequest('file must be an uploaded file part (not a text field).');
    const fields = req.body as { duration: string };
    const voice = await createVoice(
      db,
      clock,
      { blobs: deps.blobs, ffmpegPath: config.ffmpegPath, ffprobePath: config.ffprobePath, transcriber, screen: screenTexts(moderation, req) },
      { accountId: principal.account.id, file, duration: fields.duration },
    );
    const body: CreateVoice = { voice: describeVoice(voice) };
    res.status(201).json(body);
  });
  return router;
}
