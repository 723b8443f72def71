/**
 * `gemforgeFetch()`: a `fetch` for the AI client libraries people already use
 * (the official `openai` SDK, the Vercel AI SDK, LangChain), so they keep the
 * spec's rules against gemforge's chat-completions endpoint:
 *
 * - **One Idempotency-Key per logical call, kept across the library's retries.**
 *   Every spending POST needs one ("Submissions that spend Gems require an
 *   Idempotency-Key"), and a retry must reuse it ("A 5xx never permits a new
 *   identity"). A library retries by calling fetch again with the same body, so
 *   the key belongs to the body: a request whose method, URL and body repeat one
 *   that did not succeed (an error status or no answer) within `retryWindowMs`
 *   gets the same key; once a call succeeds, the same body again is a new
 *   logical call with a new key. A key the caller set is sent as set.
 * - **No blind retries of final answers.** A response marked `x-should-retry:
 *   false` (IDEMPOTENCY_CONFLICT, PRICE_CHANGED, REQUEST_FAILED …) is final; some
 *   libraries retry a 409 anyway. The same request again within the window gets
 *   that answer back without going to the server.
 * - **No `stream_options`.** The server refuses unknown fields, and LangChain and
 *   the Vercel AI SDK send `stream_options: {include_usage: true}` whether asked
 *   or not. It is dropped from chat-completions requests: nothing is lost, since
 *   the final chunk of every successful stream carries `usage` anyway.
 *
 * Browser-safe (Web Crypto, Fetch API only).
 */
import { newIdempotencyKey } from './idempotency.ts';

export interface GemforgeFetchOptions {
  /** The fetch underneath (default: the global one). */
  fetch?: typeof fetch;
  /** How long a call that did not succeed keeps its key for a retry of it (default 10 minutes). */
  retryWindowMs?: number;
  /** Prefix of generated keys (default `gf`). */
  keyPrefix?: string;
}

interface Call {
  key: string;
  /** When this entry stops counting as the same logical call. */
  until: number;
  /** An attempt is out: a second identical request now is another call, not a retry. */
  inFlight: boolean;
  /** A final answer (`x-should-retry: false`) to give a blind retry instead of the server. */
  final?: { status: number; statusText: string; headers: [string, string][]; body: ArrayBuffer };
}

/** Fields the chat-completions contract refuses that libraries send unasked. */
const DROPPED_CHAT_FIELDS = ['stream_options'];
const MAX_CALLS = 1000;

async function digest(text: string): Promise<string> {
  const bytes = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The request's body as text, when it is one we can read again (string, bytes); undefined otherwise. */
function bodyText(body: BodyInit | null | undefined): string | undefined {
  if (body === undefined || body === null) return '';
  if (typeof body === 'string') return body;
  if (body instanceof ArrayBuffer) return new TextDecoder().decode(body);
  if (ArrayBuffer.isView(body)) return new TextDecoder().decode(body);
  return undefined;
}

/** A chat-completions body without the fields the contract refuses; the text unchanged when there are none. */
function withoutDroppedFields(url: string, text: string): string {
  if (!/\/chat\/completions\/?(\?|$)/.test(url) || !DROPPED_CHAT_FIELDS.some((f) => text.includes(`"${f}"`))) return text;
  try {
    const json = JSON.parse(text) as Record<string, unknown>;
    for (const field of DROPPED_CHAT_FIELDS) delete json[field];
    return JSON.stringify(json);
  } catch {
    return text;
  }
}

/** A fetch that keeps gemforge's idempotency rules for libraries that do not know them (see the module header). */
export function gemforgeFetch(options: GemforgeFetchOptions = {}): typeof fetch {
  const inner = options.fetch ?? globalThis.fetch.bind(globalThis);
  const windowMs = options.retryWindowMs ?? 10 * 60_000;
  const calls = new Map<string, Call>();

  return async (input, init) => {
    const request = new Request(input, init);
    if (request.method !== 'POST') return inner(input, init);
    const original = init?.body !== undefined ? bodyText(init.body) : await request.clone().text();
    if (original === undefined) return inner(input, init); // a stream or form: not ours to repeat
    const text = withoutDroppedFields(request.url, original);
    const headers = new Headers(request.headers);
    if (headers.has('idempotency-key')) return inner(request.url, { ...init, method: 'POST', headers, body: text, signal: request.signal });

    const now = Date.now();
    for (const [id, call] of calls) if (call.until <= now) calls.delete(id);
    if (calls.size >= MAX_CALLS) calls.clear();
    const id = await digest(`${request.url}\n${headers.get('authorization') ?? ''}\n${text}`);
    let call = calls.get(id);
    if (call?.final) {
      const { status, statusText, headers: h, body } = call.final;
      return new Response(body.slice(0), { status, statusText, headers: h });
    }
    if (call?.inFlight) {
      // The same body while the first is still out: two calls, not a retry.
      headers.set('idempotency-key', newIdempotencyKey(options.keyPrefix));
      return inner(request.url, { ...init, method: 'POST', headers, body: text, signal: request.signal });
    }
    if (!call) call = { key: newIdempotencyKey(options.keyPrefix), until: now + windowMs, inFlight: false };
    calls.set(id, call);
    call.inFlight = true;
    headers.set('idempotency-key', call.key);

    let response: Response;
    try {
      response = await inner(request.url, { ...init, method: 'POST', headers, body: text, signal: request.signal });
    } catch (error) {
      call.inFlight = false;
      call.until = Date.now() + windowMs; // no answer: a retry is the same call
      throw error;
    }
    call.inFlight = false;
    if (response.ok) {
      calls.delete(id); // done: the same body again is a new logical call
    } else if (response.headers.get('x-should-retry') === 'false') {
      const body = await response.clone().arrayBuffer();
      call.final = { status: response.status, statusText: response.statusText, headers: [...response.headers], body };
    } else {
      call.until = Date.now() + windowMs;
    }
    return response;
  };
}
