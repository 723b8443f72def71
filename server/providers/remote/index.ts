/**
 * The remote media providers of a deployment, from configuration and the
 * catalog. Every provider is one module exporting a descriptor
 * (descriptor.ts); this file keeps the one list of them and iterates it. A
 * model names its provider (`provider:` in its catalog entry; `local` by
 * default), or is claimed by one whose environment mapping lists it
 * (IMAGE_UPSTREAM_MODELS). Checked at start: a model whose provider is not
 * configured, or a broken mapping, stops the start naming it. The catalog
 * keeps owning prices and the capabilities discovery shows.
 */
import type { Config } from '../../config.ts';
import type { Catalog, CatalogModel } from '../../domain/catalog.ts';
import type { MediaKind, MediaProvider } from '../media-types.ts';
import type { RemoteProviderDescriptor } from './descriptor.ts';
import { openAiImages } from './openai-images.ts';
import { openAiSpeech } from './openai-speech.ts';
import { fetchAllowOf } from './public-fetch.ts';
import type { ReadLimits } from './read-limit.ts';
import { replicate } from './replicate.ts';
import { fal } from './fal.ts';
import { routedMediaProvider } from '../routing/media.ts';
import type { Deployments } from '../routing/deployments.ts';

/** Every remote provider, registered once: a new provider is a module and a line here. */
export const REMOTE_PROVIDERS: readonly RemoteProviderDescriptor[] = [openAiImages, openAiSpeech, replicate, fal];

/** The names a catalog model's `provider:` may give. */
export const PROVIDER_NAMES: readonly string[] = ['local', ...REMOTE_PROVIDERS.map((d) => d.name)];

export interface RemoteMedia {
  /** The remote provider of each model that has one. */
  byModel: Record<string, MediaProvider>;
}

/**
 * The catalog as discovery shows it: each remote model's capabilities as its
 * upstream takes and makes them (its provider's `capabilities` hook), so a
 * client reads what the model will really do, not what a local generator could.
 */
export function discoveredCatalog(catalog: Catalog, remote: RemoteMedia): Catalog {
  const models = catalog.publicModels().map((m) => {
    const capabilities = remote.byModel[m.id]?.capabilities?.(m.id, m.capabilities);
    return capabilities ? { ...m, capabilities } : m;
  });
  return { ...catalog, publicModels: () => models };
}

/** The descriptor of the provider a catalog entry names or is claimed by; undefined: local. */
function descriptorOf(model: CatalogModel, config: Config): RemoteProviderDescriptor | undefined {
  const where = `catalog model ${model.id}`;
  if (model.provider === 'local') return undefined;
  if (model.provider !== undefined) {
    const named = REMOTE_PROVIDERS.find((d) => d.name === model.provider);
    if (!named) throw new Error(`${where}: provider must be one of ${PROVIDER_NAMES.join(', ')}`);
    return named;
  }
  return REMOTE_PROVIDERS.find((d) => d.claims?.(model, config));
}

const PLURAL: Record<MediaKind, string> = { image: 'images', video: 'videos', audio: 'audio' };

/** Whether the provider can make the model's kind; throws naming `where` when not. */
function checkModel(descriptor: RemoteProviderDescriptor, model: CatalogModel, where: string): void {
  if (!descriptor.kinds.includes(model.kind as MediaKind))
    throw new Error(`${where}: provider ${descriptor.name} makes ${descriptor.kinds.map((k) => PLURAL[k]).join(', ')}, not ${model.kind}`);
  const refused = descriptor.accepts?.(model);
  if (refused) throw new Error(`${where}: provider ${descriptor.name} ${refused}`);
}

/**
 * `readLimits`: the read buckets every remote provider built here takes its turn from (the process's, read-limit.ts);
 * `deployments`: where the routed models' deployments are registered (the app's or the worker's, read by /metrics).
 */
export function createRemoteMedia(config: Config, catalog: Catalog, readLimits: ReadLimits, deployments: Deployments): RemoteMedia {
  for (const descriptor of REMOTE_PROVIDERS) {
    for (const [variable, mapping] of descriptor.mappings?.(config) ?? []) {
      for (const id of Object.keys(mapping)) if (!catalog.find(id)) throw new Error(`${variable} names ${id}, which is not in the catalog`);
    }
  }
  const common = {
    deadlineMs: config.remoteDeadlineSeconds * 1000,
    attemptTimeoutMs: config.remoteAttemptTimeoutSeconds * 1000,
    maxOutputBytes: config.remoteOutputMaxBytes,
    fetchAllow: fetchAllowOf(config.remoteFetchAllow),
    readLimits,
  };
  const byModel: Record<string, MediaProvider> = {};
  for (const model of catalog.models) {
    if (model.kind === 'text') continue;
    const where = `catalog model ${model.id}`;
    // Several upstreams: each deployment one provider, composed by the routing layer.
    const routed = routedMediaProvider(model, { config, catalog, common, where }, REMOTE_PROVIDERS, checkModel, deployments);
    if (routed) {
      byModel[model.id] = routed;
      continue;
    }
    const descriptor = descriptorOf(model, config);
    if (!descriptor) continue;
    checkModel(descriptor, model, where);
    byModel[model.id] = descriptor.create(model, { config, catalog, common, where });
  }
  return { byModel };
}
