/**
 * The moderation provider the server uses: the OpenAI-compatible endpoint when
 * `MODERATION_URL` is set, the embedded policy file otherwise.
 */
import { embeddedModeration } from './local.ts';
import { openAiCompatibleModeration } from './openai.ts';
import type { ModerationPolicy } from './policy-file.ts';
import type { ModerationProvider } from './types.ts';

export function moderationProviderFor(
  policy: ModerationPolicy,
  config: { moderationUrl: string | undefined; moderationApiKey: string | undefined; moderationModel: string },
): ModerationProvider {
  return config.moderationUrl
    ? openAiCompatibleModeration(policy, { url: config.moderationUrl, apiKey: config.moderationApiKey, model: config.moderationModel })
    : embeddedModeration(policy);
}
