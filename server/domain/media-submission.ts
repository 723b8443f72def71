/**
 * The media submission use case (POST image, video, audio): the route makes
 * this one call and answers with what it returns. In order, as before it was
 * one module:
 *
 *   1. the scenario markers of the prompt (scenarios.ts);
 *   2. the model's provider, the scenario layer composed in, bound to this
 *      submission: its submission hooks (media-request.ts `submissionProvider`);
 *   3. the kind's preparation: the model's capabilities, the references, the
 *      quote (media-image.ts, media-video.ts, media-audio.ts);
 *   4. what the provider's upstream cannot do for the prepared request (its
 *      `requestProblem` hook): 422 INVALID_REQUEST naming the model, before
 *      anything is reserved;
 *   5. the provider's worker lane;
 *   6. `submitMedia` (tasks.ts): the pre-flight, admission, then the claim, the
 *      hold and the task with its job in one transaction.
 */
import type { Clock } from './clock.ts';
import type { Catalog } from './catalog.ts';
import type { Principal } from './accounts.ts';
import type { Db } from '../storage/db.ts';
import type { RecordRead } from './idempotency.ts';
import type { AdmissionLimits } from './admission.ts';
import type { MediaProviders } from '../providers/media-types.ts';
import { invalidRequest } from './errors.ts';
import { scenarioOf } from './scenarios.ts';
import { submissionProvider, type PrepareContext, type PreparedMedia } from './media-request.ts';
import { prepareImage } from './media-image.ts';
import { prepareVideo } from './media-video.ts';
import { prepareAudio } from './media-audio.ts';
import { submitMedia, type Submitted } from './tasks.ts';

export type MediaOperation = 'createImage' | 'createVideo' | 'createAudio';

type Preparer = (ctx: PrepareContext, body: never) => Promise<PreparedMedia>;

/** Each operation's media kind and preparation. */
const OPERATIONS: Record<MediaOperation, { kind: PreparedMedia['kind']; prepare: Preparer }> = {
  createImage: { kind: 'image', prepare: prepareImage },
  createVideo: { kind: 'video', prepare: prepareVideo },
  createAudio: { kind: 'audio', prepare: prepareAudio },
};

/** What the use case is built with (the route builds it once from AppDeps). */
export interface MediaSubmissionDeps {
  db: Db;
  clock: Clock;
  catalog: Catalog;
  /** The media providers, the scenario layer composed in: the model's one answers the submission hooks. */
  providers: MediaProviders;
  scenariosEnabled: boolean;
  /** Request rates and the queued-task cap (admission.ts); absent: none. */
  limits?: AdmissionLimits | undefined;
}

/** One submission as the route hands it over: the contract's body, validated. */
export interface MediaSubmissionInput {
  principal: Principal;
  idemKey: string;
  operation: MediaOperation;
  body: { model: string; prompt: string; maxGems?: number };
  /** The identity's record as the request reads it (once). */
  recorded?: RecordRead | undefined;
}

/** Submits one media request (see the header for its steps); the task made, or the one an accepted replay answers with. */
export async function submitMediaRequest(deps: MediaSubmissionDeps, input: MediaSubmissionInput): Promise<Submitted> {
  const { db, catalog, scenariosEnabled } = deps;
  const { principal, operation, body } = input;
  const { kind, prepare } = OPERATIONS[operation];
  const scenarios = scenarioOf(body.prompt, scenariosEnabled);
  const provider = submissionProvider(deps.providers, { model: body.model, kind, scenarios });
  const prepared = await prepare({ db, catalog, accountId: principal.account.id, scenarios, scenariosEnabled, provider }, body as never);
  // What the model's upstream cannot do is refused here, before anything is reserved.
  const problem = provider.requestProblem(prepared.request);
  if (problem) throw invalidRequest(`Model ${prepared.model.id}: ${problem}`);
  prepared.lane = provider.lane();
  return submitMedia(db, deps.clock, {
    principal,
    idemKey: input.idemKey,
    operation,
    body,
    maxGems: body.maxGems,
    prepared,
    provider,
    recorded: input.recorded,
    limits: deps.limits,
  });
}
