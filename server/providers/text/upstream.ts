/**
 * A text provider that forwards to any OpenAI-compatible server speaking
 * `POST /v1/chat/completions` (Ollama, vLLM, a llama.cpp server, a hosted API).
 * It always streams from the upstream (so partial output is measurable), asks
 * for usage in the final chunk (`stream_options.include_usage`), and passes
 * `temperature`, `top_p`, `max_tokens` and `response_format` through.
 *
 * Failure classes (see ProviderError): a refused connection, 429/503 or another
 * 4xx before any output is `refused` (nothing was spent); anything after the
 * request may have been accepted (other 5xx, a reset, a broken or unfinished
 * stream) is `uncertain`.
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

const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function networkCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: string; cause?: { code?: string } } })?.cause;
  return cause?.code ?? cause?.cause?.code;
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

function usageFrom(value: Partial<Usage> | null | undefined): Usage | undefined {
  if (!value || !Number.isInteger(value.prompt_tokens) || !Number.isInteger(value.completion_tokens)) return undefined;
  const prompt = value.prompt_tokens as number;
  const completion = value.completion_tokens as number;
  if (prompt < 0 || completion < 0) return undefined;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export class UpstreamTextProvider implements TextProvider {
  readonly name = 'upstream';
  private readonly endpoint: string;
  constructor(private readonly options: UpstreamOptions) {
    this.endpoint = chatCompletionsUrl(options.url);
  }

  /** Upstream text without this server's keys or anything shaped like a credential. */
  private scrub(text: string): string {
    return scrubSecrets(text, [this.options.apiKey, ...(this.options.secrets ?? [])]);
  }

  /** A remote tokenizer is unknown: bound it by bytes (every byte-level token covers at least one byte). */
  promptTokenUpperBound(messages: ChatMessage[]): number {
    return chatPromptTokenUpperBound(messages);
  }

  private async post(request: TextGenerationRequest): Promise<Response> {
    const body = {
      model: request.model,
      messages: request.messages,
      max_tokens: request.max_tokens,
      temperature: request.temperature,
      top_p: request.top_p,
      response_format: request.response_format,
      stream: true,
      stream_options: { include_usage: true },
    };
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream, application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    let res: Response;
    try {
      res = await fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 600_000),
      });
    } catch (error) {
      const code = networkCode(error);
      if (code && NOT_CONNECTED.has(code)) {
        throw new ProviderError('refused', `The upstream text provider could not be reached (${code}).`, { unavailable: true, cause: error });
      }
      throw new ProviderError('uncertain', 'The upstream text provider did not answer.', { cause: error });
    }
    if (res.ok) return res;
    const detail = this.scrub((await readErrorText(res, ERROR_BODY_MAX_BYTES)).slice(0, 300));
    if (res.status === 429 || res.status === 503) {
      throw new ProviderError('refused', `The upstream text provider is unavailable (HTTP ${res.status}).`, { unavailable: true, cause: detail });
    }
    if (res.status >= 400 && res.status < 500 && res.status !== 408) {
      throw new ProviderError('refused', `The upstream text provider rejected the request (HTTP ${res.status}).`, { cause: detail });
    }
    throw new ProviderError('uncertain', `The upstream text provider failed (HTTP ${res.status}).`, { cause: detail });
  }

  async *generate(request: TextGenerationRequest): AsyncGenerator<TextEvent> {
    const res = await this.post(request);
    const type = res.headers.get('content-type') ?? '';
    if (!type.includes('text/event-stream')) {
      yield* this.fromJson(res);
      return;
    }
    let finish: FinishReason | undefined;
    let usage: Usage | undefined;
    let done = false;
    try {
      for await (const data of sseData(res.body as unknown as AsyncIterable<Uint8Array>)) {
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
