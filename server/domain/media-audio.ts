/**
 * Audio submissions (`POST /api/generate/audio`): speech and voice_clone on the
 * speech-and-voice-cloning model, music on the music model. The rules the
 * contract cannot express (which model serves an operation, voice ownership,
 * parameters of the other operation, cover references), the normalized request
 * the local generators run, and the quote.
 */
import type { components } from '../../generated/api.ts';
import { DomainError, invalidRequest } from './errors.ts';
import { findVoice } from '../storage/voices.ts';
import type { SpeechJobRequest, SpeechVoice } from '../providers/media-types.ts';
import type { Catalog, CatalogModel, ModelOf } from './catalog.ts';
import { checkPromptLength, checkReferences, oneOf, providerPrompt, requireModel, slotsFor, type PrepareContext, type PreparedMedia } from './media-request.ts';

type AudioRequest = components['schemas']['AudioRequest'];
type SpeechRequest = components['schemas']['SpeechRequest'];
type MusicRequest = components['schemas']['MusicRequest'];
type AudioParameters = components['schemas']['MediaParametersSpeech'] | components['schemas']['MediaParametersMusic'];
type Operation = AudioRequest['operation'];

const SPEECH_PARAMETERS = ['voiceProfileId', 'speed', 'volume', 'temperature'] as const;
const MUSIC_PARAMETERS = ['musicMode', 'instrumental', 'style', 'title', 'negativeTags', 'vocalGender', 'duration', 'coverAudio'] as const;

/** The discovery model that serves `operation` (its capabilities.operations lists it). */
export function modelForOperation(catalog: Catalog, operation: Operation): CatalogModel | undefined {
  return catalog.models.find((m) => m.kind === 'audio' && m.capabilities.operations.includes(operation));
}

type AudioModelOf<A extends 'speech' | 'music'> = Extract<ModelOf<'audio'>, { audio: A }>;

/** The request's model must be the one that serves the operation, else 422 MODEL_UNAVAILABLE naming it. */
function requireOperationModel<A extends 'speech' | 'music'>(catalog: Catalog, id: string, operation: Operation, audio: A): AudioModelOf<A> {
  const serving = modelForOperation(catalog, operation);
  if (!serving) throw new DomainError('MODEL_UNAVAILABLE', `No model of this service offers operation ${operation}.`);
  if (id !== serving.id) {
    throw new DomainError('MODEL_UNAVAILABLE', `Model "${id}" does not offer operation ${operation}; use model ${serving.id} (see GET /api/generate/models).`);
  }
  return requireModel(catalog, id, 'audio', (m) => m.audio === audio) as AudioModelOf<A>;
}

/** Parameters that belong to the other operation → 422 naming the first one. */
function rejectForeign(p: AudioParameters, names: readonly string[], operation: Operation): void {
  const found = names.find((n) => (p as Record<string, unknown>)[n] !== undefined);
  if (found) {
    const belongs = (SPEECH_PARAMETERS as readonly string[]).includes(found) ? 'speech and voice_clone' : 'music';
    throw invalidRequest(`parameters.${found} is a ${belongs} parameter; operation ${operation} does not accept it.`);
  }
}

function inRange(name: string, value: number, range: { min: number; max: number }): number {
  if (value < range.min || value > range.max) throw invalidRequest(`parameters.${name} ${value} is outside ${range.min} to ${range.max}.`);
  return value;
}

/** Speech price: perThousandChars per 1,000 characters of spoken text (rounded up), at least the minimum. */
export function speechPrice(chars: number, pricing: { perThousandChars: number; minimum: number }): number {
  return Math.max(pricing.minimum, Math.ceil((chars / 1000) * pricing.perThousandChars));
}

/** Music price: perThirtySeconds for every started 30 seconds. */
export function musicPrice(seconds: number, pricing: { perThirtySeconds: number }): number {
  return Math.ceil(seconds / 30) * pricing.perThirtySeconds;
}

export async function prepareAudio(ctx: PrepareContext, body: AudioRequest): Promise<PreparedMedia> {
  return body.operation === 'music' ? prepareMusic(ctx, body) : prepareSpeech(ctx, body, body.operation);
}

async function requireVoice(ctx: PrepareContext, id: string, operation: Operation): Promise<SpeechVoice> {
  const row = await findVoice(ctx.db, id);
  const own = row && row.visibility === 'private' && row.account_id === ctx.accountId;
  const usable = row && row.state === 'ready' && (operation === 'voice_clone' ? own : own || row.visibility === 'public');
  if (!row || !usable) {
    const expected =
      operation === 'voice_clone'
        ? 'voice_clone needs one of your own private voices uploaded with POST /api/generate/voices'
        : 'speech needs a public voice (GET /api/generate/voices?scope=explore) or one of your own';
    const why = row && row.visibility === 'public' && row.state === 'ready' ? 'is a public voice' : 'is not a usable voice of this account';
    throw new DomainError('INVALID_REFERENCE', `parameters.voiceProfileId ${id} ${why}; ${expected}.`);
  }
  return { id: row.id, source: row.source, language: row.language, traits: JSON.parse(row.traits) as Record<string, unknown>, blobSha256: row.blob_sha256 };
}

async function prepareSpeech(ctx: PrepareContext, body: SpeechRequest, operation: SpeechJobRequest['operation']): Promise<PreparedMedia> {
  const model = requireOperationModel(ctx.catalog, body.model, operation, 'speech');
  const caps = model.capabilities;
  const p = body.parameters ?? {};
  rejectForeign(p, MUSIC_PARAMETERS, body.operation);
  if ((body.referenceAssetIds ?? []).length > 0) {
    throw invalidRequest(`referenceAssetIds is not used by operation ${body.operation}: the voice comes from parameters.voiceProfileId; send no references.`);
  }
  checkPromptLength(body.prompt, caps.maxPromptChars, model.id);
  const text = providerPrompt(body.prompt, ctx.scenariosEnabled).trim();
  if (!text) throw invalidRequest(`prompt is empty: ${body.operation} needs the text to speak.`);
  if (!p.voiceProfileId) throw invalidRequest(`parameters.voiceProfileId is required for operation ${body.operation}.`);
  const voice = await requireVoice(ctx, p.voiceProfileId, body.operation);
  const speed = inRange('speed', p.speed ?? caps.speed.default, caps.speed);
  const volume = inRange('volume', p.volume ?? caps.volume.default, caps.volume);
  const temperature = inRange('temperature', p.temperature ?? caps.temperature.default, caps.temperature);

  const price = speechPrice(Array.from(text).length, model.pricing);
  return {
    kind: 'audio',
    model,
    scenarios: ctx.scenarios,
    outputPrices: slotsFor(ctx, price, 1),
    request: { operation, text, voice, speed, volume, temperature, seed: p.seed ?? null, mimeType: caps.outputFormat },
  };
}

async function prepareMusic(ctx: PrepareContext, body: MusicRequest): Promise<PreparedMedia> {
  const model = requireOperationModel(ctx.catalog, body.model, 'music', 'music');
  const caps = model.capabilities;
  const p = body.parameters ?? {};
  const id = model.id;
  rejectForeign(p, SPEECH_PARAMETERS, 'music');
  const musicMode = oneOf('musicMode', p.musicMode ?? 'simple', caps.modes, id);
  if (musicMode === 'simple') {
    if (p.style !== undefined)
      throw invalidRequest('parameters.style belongs to advanced mode; set parameters.musicMode to "advanced" or describe the style in prompt.');
    if (p.title !== undefined) throw invalidRequest('parameters.title belongs to advanced mode; set parameters.musicMode to "advanced".');
  }
  checkPromptLength(body.prompt, caps.maxPromptChars[musicMode], id, `prompt (${musicMode} mode)`);
  const instrumental = oneOf('instrumental', p.instrumental ?? 'on', caps.instrumental, id);
  const vocalGender = oneOf('vocalGender', p.vocalGender ?? 'auto', caps.vocalGender, id);
  const duration = oneOf('duration', p.duration ?? 'off', caps.durations, id);
  const durationSeconds = duration === 'off' ? caps.autoDurationSeconds : Number(duration);

  const references = body.referenceAssetIds ?? [];
  if (p.coverAudio !== undefined && references.length > 0) {
    throw invalidRequest('Give the cover audio once: either parameters.coverAudio or a single referenceAssetIds entry, not both.');
  }
  if (references.length > 1) throw invalidRequest(`referenceAssetIds has ${references.length} items; music takes at most one (the cover audio).`);
  const coverAudio = p.coverAudio ?? references[0] ?? null;
  if (coverAudio && !caps.cover) throw invalidRequest(`parameters.coverAudio is not supported by model ${id}.`);
  await checkReferences(ctx, coverAudio ? [{ id: coverAudio, kinds: ['audio'] }] : []);

  const price = musicPrice(durationSeconds, model.pricing);
  return {
    kind: 'audio',
    model,
    scenarios: ctx.scenarios,
    outputPrices: slotsFor(ctx, price, 1),
    request: {
      operation: 'music',
      prompt: providerPrompt(body.prompt, ctx.scenariosEnabled),
      musicMode,
      instrumental,
      style: p.style ?? null,
      title: p.title ?? null,
      negativeTags: p.negativeTags ?? null,
      vocalGender,
      durationSeconds,
      coverAudio,
      seed: p.seed ?? null,
      mimeType: caps.outputFormat,
    },
  };
}
