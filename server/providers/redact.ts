/**
 * Upstream text (an error frame, an error body) may echo what it was sent,
 * this server's key included: it is scrubbed before it reaches a log line or
 * an error's cause. The configured keys are removed wherever they appear, and
 * so is anything shaped like a credential (`Bearer …`, `sk-…`, Replicate's
 * `r8_…`), whoever's it is.
 */
import type { Config } from '../config.ts';

const SHAPES: ReadonlyArray<[RegExp, string]> = [
  [/\bBearer\s+[^\s"',;]+/gi, 'Bearer [redacted]'],
  [/\bsk-[A-Za-z0-9_-]{8,}/g, '[redacted]'],
  [/\br8_[A-Za-z0-9]{8,}/g, '[redacted]'],
];

/** The upstream keys of a configuration, for `scrubSecrets`. */
export function upstreamSecrets(
  config: Partial<
    Pick<Config, 'textUpstreamApiKey' | 'imageUpstreamApiKey' | 'speechUpstreamApiKey' | 'replicateApiToken' | 'moderationApiKey' | 'upstreamKeys'>
  >,
): string[] {
  const named = Object.values(config.upstreamKeys ?? {});
  return [
    config.textUpstreamApiKey,
    config.imageUpstreamApiKey,
    config.speechUpstreamApiKey,
    config.replicateApiToken,
    config.moderationApiKey,
    ...named,
  ].filter((k): k is string => typeof k === 'string' && k.length > 0);
}

/** `text` with every given secret (of 4 characters or more) and every credential-shaped token replaced by `[redacted]`. */
export function scrubSecrets(text: string, secrets: ReadonlyArray<string | undefined> = []): string {
  let out = text;
  for (const secret of secrets) if (secret && secret.length >= 4) out = out.split(secret).join('[redacted]');
  for (const [pattern, replacement] of SHAPES) out = out.replace(pattern, replacement);
  return out;
}
