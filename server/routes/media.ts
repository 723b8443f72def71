/**
 * POST /api/generate/image (and, on the same path shape, video and audio):
 * translate HTTP ↔ the media submission use case (domain/media-submission.ts),
 * one call. 202 {task, created: true} for new work, 200 {task, created: false}
 * for an accepted replay.
 */
import { Router, type Request, type Response } from 'express';
import type { components } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { identityRecordOf, principalOf } from '../http/context.ts';
import { viewTask } from '../domain/tasks.ts';
import { submitMediaRequest, type MediaOperation, type MediaSubmissionDeps, type MediaSubmissionInput } from '../domain/media-submission.ts';
import { baseUrlFor } from '../http/base-url.ts';

type Submission = components['schemas']['Submission'];

const OPERATIONS: Array<{ path: string; operation: MediaOperation }> = [
  { path: '/api/generate/image', operation: 'createImage' },
  { path: '/api/generate/video', operation: 'createVideo' },
  { path: '/api/generate/audio', operation: 'createAudio' },
];

export function mediaRouter(deps: Pick<AppDeps, 'db' | 'clock' | 'catalog' | 'config' | 'admission' | 'signer' | 'mediaProviders'>): Router {
  const { db, clock, config, signer } = deps;
  const submission: MediaSubmissionDeps = {
    db,
    clock,
    catalog: deps.catalog,
    providers: deps.mediaProviders,
    scenariosEnabled: config.scenariosEnabled,
    limits: deps.admission,
  };
  const baseUrl = baseUrlFor(config);
  const router = Router();
  for (const { path, operation } of OPERATIONS) {
    router.post(path, async (req: Request, res: Response) => {
      const { created, task, written } = await submitMediaRequest(submission, {
        principal: principalOf(req),
        idemKey: req.get('idempotency-key')!,
        operation,
        body: req.body as MediaSubmissionInput['body'],
        recorded: identityRecordOf(req, db),
      });
      const view = await viewTask(db, clock, signer, baseUrl(req), task, written);
      const response: Submission = { task: view, created };
      res.status(created ? 202 : 200).json(response);
    });
  }
  return router;
}
