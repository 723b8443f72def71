/**
 * The moderation provider the server uses, by `MODERATION_MODE`: the embedded
 * policy file, the OpenAI-compatible endpoint at `MODERATION_URL`, or both in
 * turn (second-opinion.ts).
 */
import { embeddedModeration } from './local.ts';
import { openAiCompatibleModeration } from './openai.ts';
import type { ModerationPolicy } from './policy-file.ts';
import { RemoteFallbacks, withRemote, type RemoteFallback } from './second-opinion.ts';
import type { ModerationProvider } from './types.ts';

/** The embedded provider of `policy`: what the server judges short texts with, and its moderation threads long ones (moderation-worker.ts). */
export function embeddedProvider(policy: ModerationPolicy, options: { classifier: boolean }): ModerationProvider {
  return embeddedModeration(policy, undefined, options.classifier ? {} : { classifier: false });
}

/**
 * `embedded`: the embedded provider as the server runs it (long texts on threads, off-thread.ts); by default in process.
 * `fallbacks`: where the remote endpoint's failures are counted (the app's, read by /metrics).
 */
export function moderationProviderFor(
  policy: ModerationPolicy,
  config: {
    moderationUrl: string | undefined;
    moderationApiKey: string | undefined;
    moderationModel: string;
    moderationMode: 'embedded' | 'remote' | 'both';
    moderationRemoteFallback: RemoteFallback;
    moderationClassifier: boolean;
  },
  embedded: ModerationProvider = embeddedProvider(policy, { classifier: config.moderationClassifier }),
  fallbacks: RemoteFallbacks = new RemoteFallbacks(),
): ModerationProvider {
  if (config.moderationMode === 'embedded' || !config.moderationUrl) return embedded;
  const remote = openAiCompatibleModeration(policy, { url: config.moderationUrl, apiKey: config.moderationApiKey, model: config.moderationModel });
  return withRemote(embedded, remote, config.moderationMode, config.moderationRemoteFallback, fallbacks);
}
