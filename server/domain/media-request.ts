/**
 * Preparing a media submission: the rules the contract's schema cannot express
 * (the model's capabilities, reference ownership and readiness), the normalized
 * request the provider runs, and the quote (a price per output slot).
 * Shared by image, video and audio; each kind adds its own `prepare…`.
 */
import { DomainError, invalidRequest } from './errors.ts';
import type { Db } from '../storage/db.ts';
import type { AssetKind } from '../storage/assets.ts';
import { providerOf, type JobRequests, type MediaKind, type MediaProvider, type MediaProviders, type MediaSubmission } from '../providers/media-types.ts';
import { requireUsableAsset } from './assets.ts';
import type { Catalog, CatalogModel, ModelKind, ModelOf } from './catalog.ts';
import { stripScenarios, type Scenario } from './scenarios.ts';

/** What a media kind's preparation produces. */
interface Prepared<K extends MediaKind> {
  kind: K;
  model: CatalogModel;
  /** The normalized request the provider runs (the job payload, stored on the task as JSON). */
  request: JobRequests[K];
  /** Gems per output slot; the quote is their sum, and each succeeded slot is charged its price. */
  outputPrices: number[];
  scenarios: Scenario[];
  /** The worker lane of the model's provider (set by the submission use case; `local` when absent). */
  lane?: 'local' | 'remote';
}

export type PreparedMedia = { [K in MediaKind]: Prepared<K> }[MediaKind];

export interface PrepareContext {
  db: Db;
  catalog: Catalog;
  accountId: string;
  scenarios: Scenario[];
  scenariosEnabled: boolean;
  /** The model's provider as the submission asks it (submissionProvider); absent: one without submission hooks. */
  provider?: SubmissionProvider;
}

/**
 * The submission hooks of the provider that will run a model's jobs, bound to
 * one submission, with the ordinary answer where it has no hook (see MediaProvider).
 */
export interface SubmissionProvider {
  /** False: 503 PROVIDER_UNAVAILABLE before anything is claimed. */
  admit(): boolean;
  /** After a refusal: seconds until it may take work again, if the provider knows. */
  unavailableFor(): number | undefined;
  /** The first of these references the provider cannot use yet, if any. */
  referencePending(assetIds: string[]): string | undefined;
  /** The output slots made for `outputCount` outputs. */
  slots(outputCount: number): number;
  /** `lost`: the submission is recorded uncertain (claimed, reserved, no task). */
  dispatchOutcome(): 'known' | 'lost';
  /** What the provider's upstream cannot do for the prepared request (a 422 before anything is reserved), if anything. */
  requestProblem(request: JobRequests[MediaKind]): string | undefined;
  /** The worker lane that runs its jobs. */
  lane(): 'local' | 'remote';
}

/** The provider of `submission.model` among `providers` (the scenario layer composed in), bound to the submission. */
export function submissionProvider(providers: MediaProviders, submission: MediaSubmission): SubmissionProvider {
  // A model of another kind falls back to its kind's provider; preparation refuses it anyway.
  const provider: MediaProvider | undefined = providerOf(providers, submission.model, submission.kind);
  return {
    admit: () => provider?.admit?.(submission) ?? true,
    unavailableFor: () => provider?.unavailableFor?.(),
    referencePending: (assetIds) => provider?.referencePending?.(submission, assetIds),
    slots: (outputCount) => provider?.slots?.(submission, outputCount) ?? outputCount,
    dispatchOutcome: () => provider?.dispatchOutcome?.(submission) ?? 'known',
    requestProblem: (request) => provider?.requestProblem?.(submission.model, request),
    lane: () => (provider?.lane === 'remote' ? 'remote' : 'local'),
  };
}

/** The catalog voice IDs the provider of speech model `model` can speak with (its `voices` hook); undefined: not restricted. */
export function providerVoices(providers: MediaProviders, model: string): readonly string[] | undefined {
  return providerOf(providers, model, 'audio')?.voices?.(model);
}

/** The discovery model for a submission, or 422 MODEL_UNAVAILABLE. */
export function requireModel<K extends ModelKind>(catalog: Catalog, id: string, kind: K, check?: (m: ModelOf<K>) => boolean): ModelOf<K> {
  const found = catalog.find(id);
  const model = found?.kind === kind ? (found as ModelOf<K>) : undefined;
  if (!model || (check && !check(model))) {
    throw new DomainError(
      'MODEL_UNAVAILABLE',
      `Model "${id}" is not ${kind === 'image' ? 'an' : 'a'} ${kind} model of this service; list models with GET /api/generate/models.`,
    );
  }
  if (model.available === false) {
    throw new DomainError('MODEL_UNAVAILABLE', `Model "${id}" is not available right now.`);
  }
  return model;
}

/** `value` must be one of `allowed` (compared as strings), else 422 naming the parameter and the allowed values. */
export function oneOf<T>(name: string, value: T, allowed: readonly unknown[], modelId: string): T {
  if (!allowed.map(String).includes(String(value))) {
    const list = allowed.length ? allowed.map(String).join(', ') : 'none';
    throw invalidRequest(`parameters.${name} "${String(value)}" is not supported by model ${modelId}; allowed values: ${list}.`);
  }
  return value;
}

/** A parameter the model does not support at all → 422. */
export function unsupported(name: string, modelId: string): DomainError {
  return invalidRequest(`parameters.${name} is not supported by model ${modelId}.`);
}

/** Characters are Unicode code points, as the contract's maxLength counts them (an emoji is one). */
export function checkPromptLength(prompt: string, max: number, modelId: string, what = 'prompt'): void {
  const chars = Array.from(prompt).length;
  if (chars > max) throw invalidRequest(`${what} is ${chars} characters; model ${modelId} accepts at most ${max}.`);
}

/**
 * Every referenced asset must be owned, of the right kind and ready, here and
 * for the model's provider (422 INVALID_REFERENCE / 409 REFERENCES_PROCESSING).
 */
export async function checkReferences(ctx: PrepareContext, refs: Array<{ id: string; kinds: AssetKind[] }>): Promise<void> {
  for (const ref of refs) await requireUsableAsset(ctx.db, ctx.accountId, ref.id, ref.kinds);
  const pending = refs.length ? ctx.provider?.referencePending(refs.map((r) => r.id)) : undefined;
  if (pending) {
    throw new DomainError('REFERENCES_PROCESSING', `Reference asset ${pending} is still processing; retry with the same Idempotency-Key when it is ready.`);
  }
}

/** The prompt a provider sees: scenario markers removed. */
export function providerPrompt(prompt: string, enabled: boolean): string {
  return stripScenarios(prompt, enabled);
}

/**
 * The price of each output slot: the quote `total` of `count` outputs split over
 * the slots the provider makes for them (the scenario `partial` adds a second,
 * failing take to a single output, so its charge is a real part of the quote);
 * the first slots take the remainder.
 */
export function slotsFor(ctx: Pick<PrepareContext, 'provider'>, total: number, count: number): number[] {
  const slots = ctx.provider?.slots(count) ?? count;
  const each = Math.floor(total / slots);
  return Array.from({ length: slots }, (_, i) => each + (i < total - each * slots ? 1 : 0));
}
