/**
 * POST /api/generate/image (and, on the same path shape, video and audio):
 * translate HTTP ↔ the media use case. 202 {task, created: true} for new work,
 * 200 {task, created: false} for an accepted replay.
 */
import { Router, type Request, type Response } from 'express';
import type { components } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { identityRecordOf, principalOf } from '../http/context.ts';
import { submitMedia, viewTask } from '../domain/tasks.ts';
import { submissionProvider, type PrepareContext, type PreparedMedia } from '../domain/media-request.ts';
import { prepareImage } from '../domain/media-image.ts';
import { prepareVideo } from '../domain/media-video.ts';
import { prepareAudio } from '../domain/media-audio.ts';
import { scenarioOf } from '../domain/scenarios.ts';
import { baseUrlFor } from '../http/base-url.ts';
import { invalidRequest } from '../errors.ts';

type Submission = components['schemas']['Submission'];
type MediaBody = { model: string; prompt: string; maxGems?: number };

type Preparer = (ctx: PrepareContext, body: never) => Promise<PreparedMedia>;

const OPERATIONS: Array<{ path: string; operation: 'createImage' | 'createVideo' | 'createAudio'; prepare: Preparer }> = [
  { path: '/api/generate/image', operation: 'createImage', prepare: prepareImage as Preparer },
  { path: '/api/generate/video', operation: 'createVideo', prepare: prepareVideo as Preparer },
  { path: '/api/generate/audio', operation: 'createAudio', prepare: prepareAudio as Preparer },
];

/** The media kind each operation submits. */
const KINDS = { createImage: 'image', createVideo: 'video', createAudio: 'audio' } as const;

/** Registers a media kind's route (video and audio add theirs the same way). */
export function addMediaOperation(path: string, operation: 'createVideo' | 'createAudio', prepare: Preparer): void {
  OPERATIONS.push({ path, operation, prepare });
}

export function mediaRouter(deps: Pick<AppDeps, 'db' | 'clock' | 'catalog' | 'config' | 'signer' | 'remoteMedia' | 'mediaProviders'>): Router {
  const { db, clock, catalog, config, signer, remoteMedia, mediaProviders } = deps;
  const baseUrl = baseUrlFor(config);
  const router = Router();
  for (const { path, operation, prepare } of OPERATIONS) {
    router.post(path, async (req: Request, res: Response) => {
      const principal = principalOf(req);
      const body = req.body as MediaBody;
      const scenarios = scenarioOf(body.prompt, config.scenariosEnabled);
      const provider = submissionProvider(mediaProviders, { model: body.model, kind: KINDS[operation], scenarios });
      const prepared = await prepare({ db, catalog, accountId: principal.account.id, scenarios, scenariosEnabled: config.scenariosEnabled, provider }, body as never);
      if (remoteMedia) {
        // What the model's upstream cannot do is refused here, before anything is reserved.
        const problem = remoteMedia.problem(prepared.model.id, prepared.kind, prepared.request);
        if (problem) throw invalidRequest(`Model ${prepared.model.id}: ${problem}`);
        prepared.lane = remoteMedia.laneOf(prepared.model.id);
      }
      const { created, task, written } = await submitMedia(db, clock, {
        principal,
        idemKey: req.get('idempotency-key')!,
        operation,
        body,
        maxGems: body.maxGems,
        prepared,
        provider,
        recorded: identityRecordOf(req, db),
        limits: config,
      });
      const view = await viewTask(db, clock, signer, baseUrl(req), task, written);
      const response: Submission = { task: view, created };
      res.status(created ? 202 : 200).json(response);
    });
  }
  return router;
}
