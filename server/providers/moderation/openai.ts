/**
 * A moderation provider speaking the OpenAI `POST /v1/moderations` protocol
 * (`MODERATION_URL`, `MODERATION_API_KEY`, `MODERATION_MODEL`): every text is
 * sent in one request (`input` as a list) and each result's `categories` decide.
 * Upstream categories map to the policy file's categories through their
 * `upstream` lists, so the account's content preference applies the same way:
 * a category of strictness `standard` refuses for every account, a `strict` one
 * only for strict accounts; a flagged upstream category the file does not map
 * counts as strict.
 */
import type { ModerationPolicy } from './policy-file.ts';
import { ModerationUnavailableError, type ContentPreference, type ModerationProvider } from './types.ts';

export interface OpenAiModerationOptions {
  url: string;
  apiKey?: string | undefined;
  model: string;
  /** Give up on the endpoint after this long (default 15 s). */
  timeoutMs?: number;
}

/** Full endpoint URL from a base (`http://h:8000`, `…/v1`) or the endpoint itself. */
export function moderationEndpoint(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  if (/\/moderations$/.test(trimmed)) return trimmed;
  if (/\/v1$/.test(trimmed)) return `${trimmed}/moderations`;
  return `${trimmed}/v1/moderations`;
}

interface UpstreamResult {
  flagged?: unknown;
  categories?: unknown;
}

/** The upstream categories a result marks true (and `flagged` alone when it names none). */
function flaggedNames(result: UpstreamResult): string[] {
  const categories = result.categories && typeof result.categories === 'object' ? (result.categories as Record<string, unknown>) : {};
  const names = Object.entries(categories)
    .filter(([, v]) => v === true)
    .map(([k]) => k);
  return names.length === 0 && result.flagged === true ? ['flagged'] : names;
}

/** Our categories for the upstream names that apply to `preference`. */
export function decide(policy: ModerationPolicy, names: string[], preference: ContentPreference): string[] {
  const out = new Set<string>();
  for (const name of names) {
    const mapped = policy.categories.filter((c) => c.upstream.includes(name));
    if (mapped.length === 0 && preference === 'strict') out.add(`upstream:${name}`);
    for (const c of mapped) if (policy.applies(c, preference)) out.add(c.id);
  }
  return [...out];
}

async function post(endpoint: string, options: OpenAiModerationOptions, input: string[]): Promise<UpstreamResult[]> {
  let res: Response;
  try {
    res = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(options.apiKey && { authorization: `Bearer ${options.apiKey}` }) },
      body: JSON.stringify({ model: options.model, input }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
    });
  } catch (error) {
    throw new ModerationUnavailableError(`moderation service unreachable: ${(error as Error).message}`, 'unreachable');
  }
  if (!res.ok) {
    await res.arrayBuffer().catch(() => undefined);
    throw new ModerationUnavailableError(`moderation service answered ${res.status}`, res.status >= 500 || res.status === 429 ? 'unreachable' : 'upstream');
  }
  const body = (await res.json().catch(() => undefined)) as { results?: unknown } | undefined;
  if (!Array.isArray(body?.results) || body.results.length !== input.length || body.results.some((r) => typeof r !== 'object' || r === null)) {
    throw new ModerationUnavailableError('moderation service returned a malformed answer (one result per input expected)', 'upstream');
  }
  return body.results as UpstreamResult[];
}

export function openAiCompatibleModeration(policy: ModerationPolicy, options: OpenAiModerationOptions): ModerationProvider {
  const endpoint = moderationEndpoint(options.url);
  return {
    name: 'openai-compatible',
    async moderate({ texts, preference }) {
      const moderated = texts.filter((t) => t.text.trim() !== '');
      if (moderated.length === 0) return { provider: 'openai-compatible', flagged: undefined };
      const results = await post(
        endpoint,
        options,
        moderated.map((t) => t.text),
      );
      for (const [i, result] of results.entries()) {
        const categories = decide(policy, flaggedNames(result), preference);
        if (categories.length > 0) return { provider: 'openai-compatible', flagged: { field: moderated[i]!.field, categories } };
      }
      return { provider: 'openai-compatible', flagged: undefined };
    },
  };
}
