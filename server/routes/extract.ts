/**
 * POST /api/generate/extract/video: HTTP ↔ the extraction use case. The answer
 * goes through `res.json` (response-validated); every failure, a replayed
 * 409 ANALYSIS_FAILED included, is an ApiError for the error middleware.
 */
import { Router } from 'express';
import type { AppDeps } from '../deps.ts';
import { identityRecordOf, principalOf } from '../http/context.ts';
import { extractVideo, type ExtractDeps, type ExtractionRequest } from '../domain/extract.ts';

export const EXTRACT_PATH = '/api/generate/extract/video';

export function extractRouter(deps: AppDeps): Router {
  const extract: ExtractDeps = {
    db: deps.db,
    clock: deps.clock,
    catalog: deps.catalog,
    logger: deps.logger,
    provider: deps.providers.analysis,
    blobs: deps.blobs,
    scenariosEnabled: deps.config.scenariosEnabled,
    limits: deps.admission,
  };
  const router = Router();
  router.post(EXTRACT_PATH, async (req, res) => {
    const extraction = await extractVideo(
      extract,
      principalOf(req),
      req.get('idempotency-key') ?? '',
      req.body as ExtractionRequest,
      identityRecordOf(req, deps.db),
    );
    res.status(200).json(extraction);
  });
  return router;
}
