/**
 * Which provider serves a text model: the upstream one for catalog IDs mapped
 * in TEXT_UPSTREAM_MODELS (when TEXT_UPSTREAM_URL is set), the local stand-in
 * for every other text model.
 */
import type { Config } from '../../config.ts';
import { upstreamSecrets } from '../redact.ts';
import { LocalTextProvider } from './local.ts';
import { UpstreamTextProvider } from './upstream.ts';
import type { TextProviders } from './types.ts';

export * from './types.ts';

export function createTextProviders(
  config: Pick<Config, 'textStreamDelayMs' | 'textUpstreamUrl' | 'textUpstreamApiKey' | 'textUpstreamModels'> & Parameters<typeof upstreamSecrets>[0],
): TextProviders {
  const local = new LocalTextProvider({ delayMs: config.textStreamDelayMs });
  const upstream = config.textUpstreamUrl
    ? new UpstreamTextProvider({ url: config.textUpstreamUrl, apiKey: config.textUpstreamApiKey, secrets: upstreamSecrets(config) })
    : undefined;
  return (id) => {
    const mapped = Object.hasOwn(config.textUpstreamModels, id) ? config.textUpstreamModels[id] : undefined;
    if (upstream && mapped) return { provider: upstream, model: mapped };
    return { provider: local, model: id };
  };
}
