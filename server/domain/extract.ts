/**
 * Video analysis: the synchronous, idempotent, metered extraction call.
 *
 *   replay a completed identity (its saved 200 or 409 ANALYSIS_FAILED) before any check
 *   → check what the schema cannot (owned ready video, 25 MiB / 120 s), ask the provider's pre-flight (503)
 *   → quote the conservative whole-Gem maximum (262,144 input + 8,192 output tokens)
 *   → claim the identity and reserve in one transaction (idempotency.submit, state pending)
 *   → run the analysis provider, parse its raw answer
 *   → settle the measured usage (≤ the reservation; all of it when usage is missing)
 *     and complete the identity with the response in one transaction.
 *
 * A billed answer that does not parse completes the identity with a saved
 * 409 ANALYSIS_FAILED, which replays answer again with no new charge.
 */
import { admit, type AdmissionLimits } from './admission.ts';
import type { components, operations } from '../../generated/api.ts';
import { DomainError, invalidRequest } from './errors.ts';
import type { Logger } from '../logger.ts';
import { localBlob, type Blobs } from '../storage/blobs.ts';
import type { Db } from '../storage/db.ts';
import { AnalysisError, type AnalysisProvider, type AnalysisUsage } from '../providers/analysis/types.ts';
import type { Principal } from './accounts.ts';
import { requireUsableAsset, type AssetRow } from './assets.ts';
import type { Catalog } from './catalog.ts';
import type { Clock } from './clock.ts';
import * as idem from './idempotency.ts';
import { newId } from './ids.ts';
import * as spend from './spend.ts';
import { scenarioOf, stripScenarios } from './scenarios.ts';

export type ExtractionRequest = operations['extractVideo']['requestBody']['content']['application/json'];
export type Extraction = components['schemas']['Extraction'];
type ExtractionBody = Extraction['extraction'];
type Frame = components['schemas']['ExtractionFrame'];
type Segment = components['schemas']['ExtractionSegment'];

export const OPERATION = 'extractVideo';
/** Spec Limits: the video must be under 25 MiB … */
export const MAX_VIDEO_BYTES = 25 * 1024 * 1024;
/** … and shorter than 120 seconds. */
export const MAX_VIDEO_SECONDS = 120;
/** Spec: the reservation covers this many video input tokens … */
export const RESERVED_INPUT_TOKENS = 262_144;
/** … plus this many output tokens. */
export const RESERVED_OUTPUT_TOKENS = 8_192;

export type AnalysisRates = spend.TokenRates;

export interface ExtractDeps {
  db: Db;
  clock: Clock;
  catalog: Catalog;
  logger: Logger;
  /** The analysis provider, the scenario layer composed in (server.ts). */
  provider: AnalysisProvider;
  /** The installation's blob store. */
  blobs: Blobs;
  scenariosEnabled: boolean;
  /** Request rates (admission.ts, counted as text), decided before the claim; absent: none. */
  limits?: AdmissionLimits | undefined;
}

/** The reservation: the token quote of 262,144 input and 8,192 output tokens. */
export function conservativeMaximum(rates: AnalysisRates): number {
  return spend.tokenQuote(rates, { inputTokens: RESERVED_INPUT_TOKENS, outputTokens: RESERVED_OUTPUT_TOKENS });
}

/** The charge for measured usage (never above `reserved`). */
export function measuredCharge(rates: AnalysisRates, usage: AnalysisUsage, reserved: number): number {
  return spend.tokenCharge(rates, usage, reserved);
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);

/** The size and length limits, from the metadata probed at upload. */
export function checkVideoLimits(asset: Pick<AssetRow, 'id' | 'size_bytes' | 'duration_seconds'>): number {
  if (asset.size_bytes >= MAX_VIDEO_BYTES) {
    throw invalidRequest(
      `Video ${asset.id} is ${asset.size_bytes} bytes (${mib(asset.size_bytes)} MiB); the size limit for analysis is under 25 MiB (${MAX_VIDEO_BYTES} bytes).`,
    );
  }
  const duration = asset.duration_seconds;
  if (duration === null || !Number.isFinite(duration)) {
    throw invalidRequest(`The duration of video ${asset.id} could not be determined from its metadata; analysis needs a video shorter than 120 seconds.`);
  }
  if (duration >= MAX_VIDEO_SECONDS) {
    throw invalidRequest(`Video ${asset.id} lasts ${duration} seconds; the duration limit for analysis is shorter than ${MAX_VIDEO_SECONDS} seconds.`);
  }
  return duration;
}

/** The rules the schema cannot express and the provider's pre-flight, checked before anything is claimed. */
async function admissible(deps: ExtractDeps, principal: Principal, request: Required<Pick<ExtractionRequest, 'prompt'>> & ExtractionRequest) {
  if (request.model !== deps.catalog.analysis.id) {
    throw new DomainError('MODEL_UNAVAILABLE', `"${request.model}" is not the analysis model; use "${deps.catalog.analysis.id}".`);
  }
  const asset = await requireUsableAsset(deps.db, principal.account.id, request.videoAssetId, ['video']);
  const durationSeconds = checkVideoLimits(asset);
  const asked = {
    model: deps.catalog.analysis.id,
    prompt: stripScenarios(request.prompt, deps.scenariosEnabled),
    scenarios: scenarioOf(request.prompt, deps.scenariosEnabled),
  };
  if (deps.provider.admit?.(asked) === false) {
    throw spend.providerUnavailable('analysis provider', 'before-claim');
  }
  // The analyzer reads a file: the stored one, or a temp copy of a blob in object storage (released after the analysis).
  const local = await localBlob(deps.blobs, asset.blob_sha256);
  if (!local) throw new DomainError('INVALID_REFERENCE', `The stored bytes of video ${asset.id} are no longer available.`);
  return { asset, durationSeconds, file: local.path, release: local.release, asked };
}

/**
 * Analyses a video or replays a completed identity. Every failure is thrown as
 * DomainError (the first response of an ANALYSIS_FAILED identity included).
 */
export async function extractVideo(
  deps: ExtractDeps,
  principal: Principal,
  idemKey: string,
  body: ExtractionRequest,
  recorded?: idem.RecordRead,
): Promise<Extraction> {
  // Defaults applied, so an absent prompt and '' are the same identity.
  const request = { ...body, prompt: body.prompt ?? '' };
  const identity = spend.identityOf(principal, idemKey, OPERATION, request);
  // A completed identity replays before any current check (its result is retained).
  const existing = await idem.lookup(deps.db, identity, recorded);
  if (existing) return idem.savedResponse<Extraction>(existing);

  const { asset, durationSeconds, file, release, asked } = await admissible(deps, principal, request);
  try {
    if (deps.limits) await admit(deps.db, deps.clock, deps.limits, principal, 'text');
    return await analyse(deps, identity, request, { asset, durationSeconds, file, asked });
  } finally {
    await release();
  }
}

async function analyse(
  deps: ExtractDeps,
  identity: idem.Identity,
  request: Required<Pick<ExtractionRequest, 'prompt'>> & ExtractionRequest,
  { asset, durationSeconds, file, asked }: Omit<Awaited<ReturnType<typeof admissible>>, 'release'>,
): Promise<Extraction> {
  const rates = deps.catalog.analysis.pricing;
  const amount = conservativeMaximum(rates);
  const id = newId('ext');

  const reservationId = newId('rsv');
  const claim = await spend.inSubmission(deps.db, deps.clock, identity, async ({ claim, hold }) => {
    await claim({ state: 'pending', ref: id, reservationId }); // until the analysis's outcome
    return hold({ purpose: 'llm', kind: 'extraction', amount, maxGems: request.maxGems, ref: id, id: reservationId });
  });
  if (!claim.created) return idem.savedResponse<Extraction>(claim.record);

  // The hold as made: its settlement need not read it back (and on SQLite is one statement, spend.ts `billAndRetain`).
  const run: Run = { id, claim: { identity, reservationId, reserved: amount, ref: id, held: claim.value }, rates };
  const log = deps.logger.child({ extraction: id, asset: asset.id, provider: deps.provider.name });
  let result;
  try {
    result = await deps.provider.analyze({
      ...asked,
      video: {
        file,
        mimeType: asset.mime_type,
        sizeBytes: asset.size_bytes,
        durationSeconds,
        width: asset.width,
        height: asset.height,
        hasAudio: asset.has_audio === true,
      },
    });
  } catch (error) {
    throw await fail(deps, run, error, log);
  }
  const parsed = parseExtraction(result.output);
  // Missing usage keeps the conservative reservation (spec).
  const charge = result.usage ? measuredCharge(rates, result.usage, amount) : amount;
  log.info({ usage: result.usage ?? null, charge, reserved: amount, parsed: Boolean(parsed) }, 'analysis finished');
  if (!parsed) {
    const error = new DomainError(
      'ANALYSIS_FAILED',
      `The analysis result could not be parsed; its measured usage (${charge} Gem${charge === 1 ? '' : 's'}) is billed. Replays of this Idempotency-Key return this answer again with no new charge; a new analysis needs a new key.`,
    );
    await settle(deps, run, charge, { failure: error }, log);
    throw error;
  }
  const response: Extraction = { id, extraction: parsed };
  await settle(deps, run, charge, { answer: JSON.stringify(response) }, log);
  return response;
}

interface Run {
  id: string;
  claim: spend.Claim;
  rates: AnalysisRates;
}

/** Charges and completes the identity with its response, in one transaction; a failure leaves it uncertain. */
async function settle(deps: ExtractDeps, run: Run, charge: number, retained: idem.Retained, log: Logger): Promise<void> {
  try {
    await spend.billAndRetain(deps.db, deps.clock, run.claim, charge, retained);
  } catch (error) {
    log.error({ err: error }, 'could not settle the analysis');
    await spend.holdUncertain(deps.db, deps.clock, run.claim).catch(() => undefined);
    throw spend.requestUncertain();
  }
}

/** Records a failed analysis by the spend path's outcome rule and returns what the first response reports. */
async function fail(deps: ExtractDeps, run: Run, error: unknown, log: Logger): Promise<DomainError> {
  const failure = error instanceof AnalysisError ? error.failure : 'uncertain';
  log.warn({ err: error, failure }, 'analysis failed');
  // An analysis answers at once or not at all: no output is seen before it ends.
  const outcome = spend.outcomeOf(failure, { output: false, usage: false });
  try {
    if (outcome === 'release') {
      await spend.release(deps.db, deps.clock, run.claim);
      const refused = error as AnalysisError;
      return refused.unavailable ? spend.providerUnavailable('analysis provider', 'released') : spend.providerRejected('analysis provider', refused.message);
    }
    await spend.holdUncertain(deps.db, deps.clock, run.claim);
  } catch (recordError) {
    // The record stays pending, which replays also answer REQUEST_UNCERTAIN.
    log.error({ err: recordError }, 'could not record the failed analysis');
  }
  return spend.requestUncertain();
}

/** The retained response of a completed identity: the saved 200 body, or its saved error again. */
const REASONS = new Set<Frame['reason']>(['scene_start', 'sharpest', 'representative']);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const ms = (t: number) => Math.round(t * 1000) / 1000;

/**
 * Parses a provider's raw answer into the contract's extraction object, or
 * undefined when it is malformed (not JSON, missing or mistyped fields). What
 * parses is made to keep the contract's promises: frame times rounded to ms,
 * within [0, durationSeconds], unique and sorted; segments clamped, ordered and
 * not overlapping.
 */
export function parseExtraction(text: string): ExtractionBody | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.analysis !== 'string' || !isNum(r.durationSeconds) || r.durationSeconds < 0 || !Array.isArray(r.frames)) return undefined;
  const duration = r.durationSeconds;
  const frames = new Map<number, Frame>();
  for (const f of r.frames as unknown[]) {
    if (!f || typeof f !== 'object') return undefined;
    const { timeSeconds, reason, score } = f as Record<string, unknown>;
    if (!isNum(timeSeconds) || !REASONS.has(reason as Frame['reason']) || (score !== undefined && !isNum(score))) return undefined;
    const t = ms(timeSeconds);
    if (t < 0 || t > duration || frames.has(t)) continue;
    const frame: Frame = { timeSeconds: t, reason: reason as Frame['reason'] };
    if (score !== undefined) frame.score = Math.min(1, Math.max(0, score));
    frames.set(t, frame);
  }
  const out: ExtractionBody = { analysis: r.analysis, durationSeconds: duration, frames: [...frames.values()].sort((a, b) => a.timeSeconds - b.timeSeconds) };
  if (r.segments === undefined) return out;
  if (!Array.isArray(r.segments)) return undefined;
  const segments: Segment[] = [];
  for (const s of r.segments as unknown[]) {
    if (!s || typeof s !== 'object') return undefined;
    const { startSeconds, endSeconds, description } = s as Record<string, unknown>;
    if (!isNum(startSeconds) || !isNum(endSeconds) || typeof description !== 'string') return undefined;
    segments.push({
      startSeconds: ms(Math.min(duration, Math.max(0, startSeconds))),
      endSeconds: ms(Math.min(duration, Math.max(0, endSeconds))),
      description,
    });
  }
  segments.sort((a, b) => a.startSeconds - b.startSeconds || a.endSeconds - b.endSeconds);
  const ordered: Segment[] = [];
  let end = 0;
  for (const s of segments) {
    const start = Math.max(s.startSeconds, end);
    if (s.endSeconds <= start) continue;
    ordered.push({ startSeconds: start, endSeconds: s.endSeconds, description: s.description });
    end = s.endSeconds;
  }
  out.segments = ordered;
  return out;
}
