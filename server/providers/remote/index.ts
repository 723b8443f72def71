/**
 * The remote media providers of a deployment, from configuration and the
 * catalog: a model names its provider (`provider:` in its catalog
 * entry; `local` by default), and a model listed in IMAGE_UPSTREAM_MODELS or
 * SPEECH_UPSTREAM_MODELS uses that upstream without a catalog edit. Checked at
 * start: a model whose provider is not configured, or a broken `replicate`
 * block, stops the start naming it. The catalog keeps owning prices and the
 * capabilities discovery shows.
 */
import type { Config } from '../../config.ts';
import type { Catalog, CatalogModel } from '../../domain/catalog.ts';
import type { JobRequests, MediaKind, MediaProvider, SpeechJobRequest } from '../media-types.ts';
import { imageRequestProblem, OpenAiImagesProvider } from './openai-images.ts';
import { OpenAiSpeechProvider, speechRequestProblem } from './openai-speech.ts';
import { fetchAllowOf } from './public-fetch.ts';
import { parseReplicateEntry, ReplicateProvider, replicateRequestProblem } from './replicate.ts';

export const PROVIDER_NAMES = ['local', 'openai-images', 'openai-speech', 'replicate'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

export interface RemoteMedia {
  /** The remote provider of each model that has one. */
  byModel: Record<string, MediaProvider>;
  /** What a model's upstream cannot do for a prepared request (a 422 at submission), if anything. */
  problem(model: string, kind: MediaKind, request: JobRequests[MediaKind]): string | undefined;
  /** Which worker lane runs the model's jobs. */
  laneOf(model: string): 'local' | 'remote';
  /** The catalog voice IDs a remote speech model can speak with (SPEECH_UPSTREAM_VOICES); undefined: not restricted here. */
  voicesOf(model: string): readonly string[] | undefined;
}

/** The provider a catalog entry names, or the one its id is configured for. */
function providerName(model: CatalogModel, config: Config): ProviderName {
  if (model.provider) return model.provider as ProviderName;
  if (config.imageUpstreamModels[model.id]) return 'openai-images';
  if (config.speechUpstreamModels[model.id]) return 'openai-speech';
  return 'local';
}

export function createRemoteMedia(config: Config, catalog: Catalog): RemoteMedia {
  for (const [name, mapping] of [['IMAGE_UPSTREAM_MODELS', config.imageUpstreamModels], ['SPEECH_UPSTREAM_MODELS', config.speechUpstreamModels]] as const) {
    for (const id of Object.keys(mapping)) if (!catalog.find(id)) throw new Error(`${name} names ${id}, which is not in the catalog`);
  }
  const common = {
    deadlineMs: config.remoteDeadlineSeconds * 1000,
    attemptTimeoutMs: config.remoteAttemptTimeoutSeconds * 1000,
    maxOutputBytes: config.remoteOutputMaxBytes,
    fetchAllow: fetchAllowOf(config.remoteFetchAllow),
  };
  let images: OpenAiImagesProvider | undefined;
  let speech: OpenAiSpeechProvider | undefined;
  const byModel: Record<string, MediaProvider> = {};
  for (const model of catalog.models) {
    const name = providerName(model, config);
    const where = `catalog model ${model.id}`;
    if (name === 'local' || model.kind === 'text') continue;
    if (name === 'openai-images') {
      if (model.kind !== 'image') throw new Error(`${where}: provider openai-images makes images, not ${model.kind}`);
      if (!config.imageUpstreamUrl) throw new Error(`${where}: provider openai-images needs IMAGE_UPSTREAM_URL`);
      if (!config.imageUpstreamModels[model.id]) throw new Error(`${where}: provider openai-images needs its upstream model in IMAGE_UPSTREAM_MODELS (${model.id}=…)`);
      images ??= new OpenAiImagesProvider({ url: config.imageUpstreamUrl, apiKey: config.imageUpstreamApiKey, models: config.imageUpstreamModels, idempotent: config.imageUpstreamIdempotent, ...common });
      byModel[model.id] = images as MediaProvider;
    } else if (name === 'openai-speech') {
      if (model.kind !== 'audio' || model.audio !== 'speech') throw new Error(`${where}: provider openai-speech makes speech, not ${model.kind === 'audio' ? model.audio : model.kind}`);
      if (!config.speechUpstreamUrl) throw new Error(`${where}: provider openai-speech needs SPEECH_UPSTREAM_URL`);
      if (!config.speechUpstreamModels[model.id]) throw new Error(`${where}: provider openai-speech needs its upstream model in SPEECH_UPSTREAM_MODELS (${model.id}=…)`);
      speech ??= new OpenAiSpeechProvider({
        url: config.speechUpstreamUrl,
        apiKey: config.speechUpstreamApiKey,
        models: config.speechUpstreamModels,
        voices: config.speechUpstreamVoices,
        idempotent: config.speechUpstreamIdempotent,
        ...common,
      });
      byModel[model.id] = speech as MediaProvider;
    } else if (name === 'replicate') {
      const entry = parseReplicateEntry(model.replicate, model.kind, where);
      byModel[model.id] = new ReplicateProvider(model.kind, entry, { url: config.replicateApiUrl, token: config.replicateApiToken, pollMs: config.replicatePollMs, ...common }) as MediaProvider;
    } else {
      throw new Error(`${where}: provider must be one of ${PROVIDER_NAMES.join(', ')}`);
    }
  }
  return {
    byModel,
    laneOf: (model) => (byModel[model]?.lane === 'remote' ? 'remote' : 'local'),
    voicesOf: (model) => (byModel[model] instanceof OpenAiSpeechProvider ? Object.keys(config.speechUpstreamVoices) : undefined),
    problem(model, kind, request) {
      const provider = byModel[model];
      if (provider instanceof OpenAiImagesProvider && kind === 'image') {
        const caps = catalog.find(model)?.capabilities as { maxPromptChars?: unknown } | undefined;
        return imageRequestProblem(config.imageUpstreamModels[model]!, request as JobRequests['image'], typeof caps?.maxPromptChars === 'number' ? caps.maxPromptChars : undefined);
      }
      if (provider instanceof OpenAiSpeechProvider && kind === 'audio') return speechRequestProblem(config.speechUpstreamVoices, request as SpeechJobRequest);
      if (provider instanceof ReplicateProvider) return replicateRequestProblem(request);
      return undefined;
    },
  };
}
