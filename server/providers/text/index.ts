/**
 * Which provider serves a text model: the routed one for a catalog entry that
 * lists `deployments:` (several upstreams, server/providers/routing), the
 * upstream one for catalog IDs mapped in TEXT_UPSTREAM_MODELS (when
 * TEXT_UPSTREAM_URL is set), the local stand-in for every other text model.
 */
import type { Config } from '../../config.ts';
import type { Catalog } from '../../domain/catalog.ts';
import type { Deployments } from '../routing/deployments.ts';
import { routedTextProvider } from '../routing/text.ts';
import { upstreamSecrets } from '../redact.ts';
import { LocalTextProvider } from './local.ts';
import { UpstreamTextProvider } from './upstream.ts';
import type { TextProvider, TextProviders } from './types.ts';

export * from './types.ts';

/** `deployments`: where the routed models' deployments are registered (the app's, read by /metrics). */
export function createTextProviders(config: Config, catalog: Catalog | undefined, deployments: Deployments): TextProviders {
  const local = new LocalTextProvider({ delayMs: config.textStreamDelayMs });
  const upstream = config.textUpstreamUrl
    ? new UpstreamTextProvider({ url: config.textUpstreamUrl, apiKey: config.textUpstreamApiKey, secrets: upstreamSecrets(config) })
    : undefined;
  // Built once, at start: a broken deployments list stops the start naming the model.
  const routed = new Map<string, TextProvider>();
  for (const model of catalog?.models ?? []) {
    const provider = model.kind === 'text' ? routedTextProvider(model, config, deployments) : undefined;
    if (provider) routed.set(model.id, provider);
  }
  return (id) => {
    const own = routed.get(id);
    if (own) return { provider: own, model: id };
    const mapped = Object.hasOwn(config.textUpstreamModels, id) ? config.textUpstreamModels[id] : undefined;
    if (upstream && mapped) return { provider: upstream, model: mapped };
    return { provider: local, model: id };
  };
}
