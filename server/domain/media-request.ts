/**
 * Preparing a media submission: the rules the contract's schema cannot express
 * (the model's capabilities, reference ownership and readiness), the normalized
 * request the provider runs, and the quote (a price per output slot).
 * Shared by image, video and audio; each kind adds its own `prepare…`.
 */
import { ApiError, invalidRequest } from '../errors.ts';
import type { Db } from '../storage/db.ts';
import type { AssetKind } from '../storage/assets.ts';
import type { JobRequests, MediaKind } from '../providers/media-types.ts';
import { requireUsableAsset } from './assets.ts';
import type { Catalog, CatalogModel, ModelKind, ModelOf } from './catalog.ts';
import { findScenario, stripScenarios, type Scenario } from './scenarios.ts';

/** What a media kind's preparation produces. */
interface Prepared<K extends MediaKind> {
  kind: K;
  model: CatalogModel;
  /** The normalized request the provider runs (the job payload, stored on the task as JSON). */
  request: JobRequests[K];
  /** Gems per output slot; the quote is their sum, and each succeeded slot is charged its price. */
  outputPrices: number[];
  scenarios: Scenario[];
  /** The worker lane of the model's provider (set by the route; `local` when absent). */
  lane?: 'local' | 'remote';
}

export type PreparedMedia = { [K in MediaKind]: Prepared<K> }[MediaKind];

export interface PrepareContext {
  db: Db;
  catalog: Catalog;
  accountId: string;
  scenarios: Scenario[];
  scenariosEnabled: boolean;
}

/** Media scenario markers (docs/api.md, "Scenario triggers"), beside the text ones. */
export const MEDIA_SCENARIOS = {
  fail: 'fail',
  partial: 'partial',
  processing: 'processing',
  cancel: 'cancel',
  uncertain: 'uncertain',
  providerUnavailable: 'provider-unavailable',
  referencesProcessing: 'references-processing',
  unresumable: 'unresumable',
} as const;

/** The discovery model for a submission, or 422 MODEL_UNAVAILABLE. */
export function requireModel<K extends ModelKind>(catalog: Catalog, id: string, kind: K, check?: (m: ModelOf<K>) => boolean): ModelOf<K> {
  const found = catalog.find(id);
  const model = found?.kind === kind ? (found as ModelOf<K>) : undefined;
  if (!model || (check && !check(model))) {
    throw new ApiError(422, 'MODEL_UNAVAILABLE', `Model "${id}" is not ${kind === 'image' ? 'an' : 'a'} ${kind} model of this service; list models with GET /api/generate/models.`);
  }
  if (model.available === false) {
    throw new ApiError(422, 'MODEL_UNAVAILABLE', `Model "${id}" is not available right now.`);
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
export function unsupported(name: string, modelId: string): ApiError {
  return invalidRequest(`parameters.${name} is not supported by model ${modelId}.`);
}

/** Characters are Unicode code points, as the contract's maxLength counts them (an emoji is one). */
export function checkPromptLength(prompt: string, max: number, modelId: string, what = 'prompt'): void {
  const chars = Array.from(prompt).length;
  if (chars > max) throw invalidRequest(`${what} is ${chars} characters; model ${modelId} accepts at most ${max}.`);
}

/**
 * Every referenced asset must be owned, of the right kind and ready (422
 * INVALID_REFERENCE / 409 REFERENCES_PROCESSING). The `references-processing`
 * scenario makes the first reference look not ready.
 */
export async function checkReferences(ctx: PrepareContext, refs: Array<{ id: string; kinds: AssetKind[] }>): Promise<void> {
  for (const ref of refs) await requireUsableAsset(ctx.db, ctx.accountId, ref.id, ref.kinds);
  if (refs.length && findScenario(ctx.scenarios, MEDIA_SCENARIOS.referencesProcessing)) {
    throw new ApiError(409, 'REFERENCES_PROCESSING', `Reference asset ${refs[0].id} is still processing; retry with the same Idempotency-Key when it is ready.`);
  }
}

/** The prompt a provider sees: scenario markers removed. */
export function providerPrompt(prompt: string, enabled: boolean): string {
  return stripScenarios(prompt, enabled);
}

/**
 * Scenario `partial` on a single-output task adds a second slot (an alternate
 * take that fails), splitting the quote so the charge is a real part of it.
 */
export function slotsFor(total: number, count: number, scenarios: Scenario[]): number[] {
  if (count === 1 && findScenario(scenarios, MEDIA_SCENARIOS.partial)) {
    const first = Math.ceil(total / 2);
    return [first, total - first];
  }
  const each = Math.floor(total / count);
  return Array.from({ length: count }, (_, i) => each + (i < total - each * count ? 1 : 0));
}
