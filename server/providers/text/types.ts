/**
 * The text provider interface: what the text use case needs from a model that
 * writes chat completions, local or remote.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type FinishReason = 'stop' | 'length';

export interface TextGenerationRequest {
  /** The provider's own model name (the catalog ID for the local provider, the mapped name upstream). */
  model: string;
  messages: ChatMessage[];
  max_tokens: number;
  temperature?: number | undefined;
  top_p?: number | undefined;
  response_format?: { type: 'text' | 'json_object' } | undefined;
  /** The last user message's scenario markers (played by the scenario layer; providers ignore them and never send them). */
  scenarios?: ReadonlyArray<{ name: string; args: string[] }>;
}

/** What a provider yields: text deltas, then exactly one finish (with usage when the provider reports it). */
export type TextEvent = { type: 'delta'; content: string } | { type: 'finish'; finish_reason: FinishReason; usage?: Usage | undefined };

export interface TextProvider {
  readonly name: string;
  /** An upper bound of the prompt tokens this provider can bill for `messages` (for the reservation). */
  promptTokenUpperBound(messages: ChatMessage[]): number;
  /**
   * Pre-flight, asked before anything is claimed or reserved: false when the
   * provider cannot take work now (a circuit breaker; the scenario layer's
   * `provider-unavailable`), answered 503 PROVIDER_UNAVAILABLE with nothing
   * retained, so the same identity may be retried. Absent: always admitted.
   */
  admit?(request: TextGenerationRequest): boolean;
  /** After `admit` refused: seconds until it may take work again (the 503's Retry-After; a breaker's cooldown). */
  unavailableFor?(): number | undefined;
  /** Runs one completion. Fails with a ProviderError; any other error counts as an uncertain outcome. */
  generate(request: TextGenerationRequest): AsyncIterable<TextEvent>;
}

/**
 * How a provider call failed, which decides the money and the replay:
 * - `refused`: the provider certainly did no work (connection refused, a 4xx
 *   before generation): the reservation is released. When it is `unavailable`
 *   (it said "not now": refused connection, 429, 500, 503) the identity stays
 *   free (503 with Retry-After, a replay dispatches anew); otherwise (it
 *   rejected the request) replays get REQUEST_FAILED.
 * - `failed`: generation stopped part-way and the usage so far is known: it is
 *   billed, and the identity becomes uncertain.
 * - `uncertain`: work may have happened and its usage is unknown: the
 *   reservation stays held, replays get REQUEST_UNCERTAIN.
 */
export type ProviderFailure = 'refused' | 'failed' | 'uncertain';

export class ProviderError extends Error {
  readonly failure: ProviderFailure;
  /** For `refused`: whether the provider is unavailable (503) or rejected the request (502). */
  readonly unavailable: boolean;
  /** For `failed`: the usage measured so far. */
  readonly usage: Usage | undefined;
  /** For `refused` and `unavailable`: the provider did nothing, the identity may be sent again after this many seconds. */
  readonly retryAfterSeconds: number | undefined;
  /** The upstream's HTTP status, when it answered one (a credentials refusal is 401 or 403). */
  readonly status: number | undefined;

  constructor(
    failure: ProviderFailure,
    message: string,
    options: { unavailable?: boolean; usage?: Usage; retryAfterSeconds?: number; status?: number; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'ProviderError';
    this.failure = failure;
    this.unavailable = options.unavailable ?? false;
    this.usage = options.usage;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.status = options.status;
  }
}

export function usageOf(prompt: number, completion: number): Usage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** A text model's provider and the model name it is asked for. */
export interface ResolvedTextProvider {
  provider: TextProvider;
  /** The model name the provider is asked for. */
  model: string;
}

/** Which provider serves a catalog text model (built at the composition root, see index.ts). */
export type TextProviders = (catalogModelId: string) => ResolvedTextProvider;
