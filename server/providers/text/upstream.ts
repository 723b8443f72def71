/**
 * A text provider that forwards to any OpenAI-compatible server speaking
 * `POST /v1/chat/completions` (Ollama, vLLM, a llama.cpp server, a hosted API).
 * It always streams from the upstream (so partial output is measurable), asks
 * for usage in the final chunk (`stream_options.include_usage`), and passes
 * `temperature`, `top_p`, `max_tokens` and `response_format` through, in the
 * dialect of the upstream model (REASONING_MODELS).
 *
 * Failure classes (see ProviderError), decided per answer before any output:
 * a refused connection, 408, 429, 500 and 503 are `refused` and `unavailable`
 * (the upstream answered that it did nothing; an error answer is not billed),
 * so the identity stays free; another 4xx is `refused` (rejected, final);
 * 502, 504 and other 5xx (a gateway may answer them after the model ran),
 * a timeout, a reset, a broken or unfinished stream are `uncertain`.
 *
 * Bounded: the stream is read in linear time with one event at most 1 MiB, a
 * one-JSON answer at most 16 MiB, an error body's first 64 KiB; past a bound
 * the stream counts as broken (`uncertain`). Upstream text kept as an error's
 * cause (and so logged) is scrubbed of keys first.
 */
import { chatPromptTokenUpperBound } from '../../tokens.ts';
import { readBounded, readErrorText } from '../remote/body.ts';
import { scrubSecrets } from '../redact.ts';
import { sseData } from './sse-reader.ts';
import { agentFor, asResponse, postOnce, UpstreamTimeout, type Posted } from './http-post.ts';
import { ProviderError, type ChatMessage, type FinishReason, type TextEvent, type TextGenerationRequest, type TextProvider, type Usage } from './types.ts';

export interface UpstreamOptions {
  /** A base such as `http://localhost:11434`, `…/v1`, or the full `…/v1/chat/completions`. */
  url: string;
  apiKey?: string | undefined;
  /** Gives up on a silent upstream after this long (the outcome is then uncertain). */
  timeoutMs?: number;
  /** Keys scrubbed from upstream text before it becomes an error's cause or a log line (this provider's own key always is). */
  secrets?: string[];
}

/** The largest one-JSON completion read (an upstream that ignores `stream`); larger fails as a broken answer. */
const JSON_ANSWER_MAX_BYTES = 16 * 1024 * 1024;
/** Error bodies are read for a detail only: their head. */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** The chat-completions endpoint for a configured base URL. */
export function chatCompletionsUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  if (trimmed.endsWith('/chat/completions')) return trimmed;
  if (/\/v\d+$/.test(trimmed)) return `${trimmed}/chat/completions`;
  return `${trimmed}/v1/chat/completions`;
}

/** The upstream's `Retry-After` in whole seconds (1–60), else undefined. */
function retryAfterSecondsOf(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - Date.now();
  return Number.isFinite(ms) ? Math.min(60, Math.max(1, Math.ceil(ms / 1000))) : undefined;
}

const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function networkCode(error: unknown): string | undefined {
  return (error as { code?: string })?.code;
}

/**
 * OpenAI's reasoning models (o1*, o3*, o4*, gpt-5*, also behind an `openai/`
 * prefix) refuse `max_tokens` ("Use 'max_completion_tokens' instead") and a
 * `temperature` or `top_p` of their own: the limit goes as
 * `max_completion_tokens` (it bounds the hidden reasoning and the answer
 * together, so the reservation still bounds the charge) and the sampling
 * parameters are left out. docs/providers.md has the table.
 */
export const REASONING_MODELS = /^(?:[\w.-]+\/)?(?:o1|o3|o4|gpt-5)(?:$|[-.:])/;

/** The request body for an upstream model, in its dialect. */
export function upstreamBody(request: TextGenerationRequest): Record<string, unknown> {
  const common = {
    model: request.model,
    messages: request.messages,
    response_format: request.response_format,
    stream: true,
    stream_options: { include_usage: true },
  };
  if (REASONING_MODELS.test(request.model)) return { ...common, max_completion_tokens: request.max_tokens };
  return { ...common, max_tokens: request.max_tokens, temperature: request.temperature, top_p: request.top_p };
}

interface UpstreamChunk {
  choices?: Array<{ delta?: { content?: string | null }; message?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: Partial<Usage> | null;
  error?: { message?: string };
}

/** A stream frame's JSON; a parse error would quote the frame (and whatever it echoes), so it is replaced. */
function parseFrame(data: string): UpstreamChunk {
  try {
    return JSON.parse(data) as UpstreamChunk;
  } catch {
    throw new Error('upstream frame is not JSON');
  }
}

function finishReason(value: string | null | undefined): FinishReason | undefined {
  if (!value) return undefined;
  return value === 'length' ? 'length' : 'stop';
}

/**
 * The usage as billed. Hidden reasoning tokens are billed as output: OpenAI
 * counts them inside `completion_tokens` (`completion_tokens_details` only
 * breaks them out); a server that reports fewer completion tokens than
 * reasoning tokens counted them apart, and they are added.
 */
function usageFrom(value: (Partial<Usage> & { completion_tokens_details?: { reasoning_tokens?: unknown } | null }) | null | undefined): Usage | undefined {
  if (!value || !Number.isInteger(value.prompt_tokens) || !Number.isInteger(value.completion_tokens)) return undefined;
  const prompt = value.prompt_tokens as number;
  const reasoning = value.completion_tokens_details?.reasoning_tokens;
  const apart = Number.isInteger(reasoning) && (reasoning as number) > (value.completion_tokens as number) ? (reasoning as number) : 0;
  const completion = (value.completion_tokens as number) + apart;
  if (prompt < 0 || completion < 0) return undefined;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** One header's value (the first, when repeated). */
function headerOf(res: Posted, name: string): string | null {
  const value = res.headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

export class UpstreamTextProvider implements TextProvider {
  readonly name = 'upstream';
  private readonly endpoint: string;
  /** Kept-alive connections to the upstream, as fetch kept them. */
  private readonly agent: ReturnType<typeof agentFor>;
  constructor(private readonly options: UpstreamOptions) {
    this.endpoint = chatCompletionsUrl(options.url);
    this.agent = agentFor(this.endpoint);
  }

  /** Upstream text without this server's keys or anything shaped like a credential. */
  private scrub(text: string): string {
    return scrubSecrets(text, [this.options.apiKey, ...(this.options.secrets ?? [])]);
  }

  /** A remote tokenizer is unknown: bound it by bytes (every byte-level token covers at least one byte). */
  promptTokenUpperBound(messages: ChatMessage[]): number {
    return chatPromptTokenUpperBound(messages);
  }

  private async post(request: TextGenerationRequest): Promise<Posted> {
    const body = upstreamBody(request);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream, application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    let res: Posted;
    try {
      res = await postOnce(this.endpoint, headers, JSON.stringify(body), this.agent, this.options.timeoutMs ?? 600_000);
    } catch (error) {
      const code = error instanceof UpstreamTimeout ? undefined : networkCode(error);
      if (code && NOT_CONNECTED.has(code)) {
        throw new ProviderError('refused', `The upstream text provider could not be reached (${code}).`, { unavailable: true, cause: error });
      }
      throw new ProviderError('uncertain', 'The upstream text provider did not answer.', { cause: error });
    }
    if (res.status >= 200 && res.status < 300) return res;
    if (res.status < 200 || res.status > 599) {
      res.body.destroy();
      throw new ProviderError('uncertain', `The upstream text provider answered HTTP ${res.status}.`);
    }
    const detail = this.scrub((await readErrorText(asResponse(res), ERROR_BODY_MAX_BYTES)).slice(0, 300));
    res.finish();
    if ([408, 429, 500, 503].includes(res.status)) {
      const retryAfterSeconds = retryAfterSecondsOf(headerOf(res, 'retry-after'));
      throw new ProviderError('refused', `The upstream text provider is unavailable (HTTP ${res.status}).`, {
        unavailable: true,
        retryAfterSeconds,
        status: res.status,
        cause: detail,
      });
    }
    if (res.status >= 400 && res.status < 500) {
      throw new ProviderError('refused', `The upstream text provider rejected the request (HTTP ${res.status}).`, { status: res.status, cause: detail });
    }
    throw new ProviderError('uncertain', `The upstream text provider failed (HTTP ${res.status}).`, { cause: detail });
  }

  async *generate(request: TextGenerationRequest): AsyncGenerator<TextEvent> {
    const res = await this.post(request);
    const type = headerOf(res, 'content-type') ?? '';
    if (!type.includes('text/event-stream')) {
      yield* this.fromJson(asResponse(res));
      return;
    }
    let finish: FinishReason | undefined;
    let usage: Usage | undefined;
    let done = false;
    try {
      // Leaving at [DONE] must not destroy the body: the rest is drained (finish) and the connection kept.
      for await (const data of sseData(res.body.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>)) {
        if (data === '[DONE]') {
          done = true;
          break;
        }
        const chunk = parseFrame(data);
        if (chunk.error) throw new Error(`upstream error frame: ${this.scrub(String(chunk.error.message ?? 'unknown'))}`);
        const choice = chunk.choices?.[0];
        const content = choice?.delta?.content;
        if (typeof content === 'string' && content.length > 0) yield { type: 'delta', content };
        finish = finishReason(choice?.finish_reason) ?? finish;
        usage = usageFrom(chunk.usage) ?? usage;
      }
    } catch (error) {
      throw new ProviderError('uncertain', 'The upstream text stream broke off.', { cause: error });
    } finally {
      // Read to its end (or to [DONE]): the rest is drained and the connection kept; else (a break-off, a consumer gone) it is dropped.
      if (done || finish) res.finish();
      else res.body.destroy();
    }
    if (!done && !finish) throw new ProviderError('uncertain', 'The upstream text stream ended unfinished.');
    yield { type: 'finish', finish_reason: finish ?? 'stop', usage };
  }

  /** An upstream that ignores `stream` and answers one JSON completion. */
  private async *fromJson(res: Response): AsyncGenerator<TextEvent> {
    let body: UpstreamChunk;
    try {
      body = JSON.parse((await readBounded(res, JSON_ANSWER_MAX_BYTES, 'The upstream text provider')).toString('utf8')) as UpstreamChunk;
    } catch (error) {
      throw new ProviderError('uncertain', 'The upstream text provider answered unreadable JSON.', { cause: error });
    }
    const choice = body.choices?.[0];
    const content = choice?.message?.content;
    if (typeof content !== 'string') throw new ProviderError('uncertain', 'The upstream completion had no message content.');
    if (content) yield { type: 'delta', content };
    yield { type: 'finish', finish_reason: finishReason(choice?.finish_reason) ?? 'stop', usage: usageFrom(body.usage) };
  }
}
