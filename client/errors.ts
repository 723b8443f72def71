/**
 * The Error envelope `{error: {code?, message}}` as a small typed error family,
 * one class per status family (openai-node's status-keyed errors). `code` stays
 * the spec's string; `hint` is the spec's "required client behaviour" for it.
 * Browser-safe: no Node imports.
 */

/** Fields every gemforge error carries. */
export interface GemforgeErrorInit {
  status?: number;
  code?: string;
  message: string;
  requestId?: string;
  /** The Idempotency-Key of the logical operation, when it was a spending call. */
  idempotencyKey?: string;
  /** `x-should-retry: false` from the server. */
  shouldRetry?: boolean;
  /** The server's `Retry-After`, in ms (seconds or an HTTP date). */
  retryAfterMs?: number;
  cause?: unknown;
}

export class GemforgeError extends Error {
  /** HTTP status, undefined for network failures and stream errors after a 200. */
  readonly status: number | undefined;
  /** The spec's code (`INVALID_API_KEY`, `REQUEST_UNCERTAIN`, …); some errors have none. */
  readonly code: string | undefined;
  /** The `x-request-id` of the failing response, for support and logs. */
  readonly requestId: string | undefined;
  /** The identity that was used; replay with it, never with a new one, after a 5xx or REQUEST_UNCERTAIN. */
  idempotencyKey: string | undefined;
  /** How many attempts the client made with that identity before giving up. */
  attempts = 1;
  readonly shouldRetry: boolean | undefined;
  /** How long the server asked to wait before the same identity is tried again (`Retry-After`), in ms. */
  readonly retryAfterMs: number | undefined;

  constructor(init: GemforgeErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.idempotencyKey = init.idempotencyKey;
    this.shouldRetry = init.shouldRetry;
    this.retryAfterMs = init.retryAfterMs;
  }

  /** One line of what to do about this error (from the spec's Errors table). */
  get hint(): string {
    return hintFor(this.code, this.status);
  }
}

/** 400: the request could not be parsed (malformed JSON); codes are not fixed. */
export class BadRequestError extends GemforgeError {}
/** 401 `INVALID_API_KEY`. */
export class AuthenticationError extends GemforgeError {}
/** 402 `API_KEY_LIMIT`, `LLM_QUOTA_EXHAUSTED`, `INSUFFICIENT_GEMS`. */
export class PaymentRequiredError extends GemforgeError {}
/** 403 `INSUFFICIENT_SCOPE`, `ACCOUNT_BLOCKED`, `ACCOUNT_UNAVAILABLE`, `NETWORK_BLOCKED`, `REGION_BLOCKED`. */
export class PermissionError extends GemforgeError {}
/** 404 `NOT_FOUND`. */
export class NotFoundError extends GemforgeError {}
/** 409 `PRICE_CHANGED`, `IDEMPOTENCY_CONFLICT`, `REQUEST_UNCERTAIN`, `REQUEST_FAILED`, `REFERENCES_PROCESSING`, `ANALYSIS_FAILED`. */
export class ConflictError extends GemforgeError {}
/** 413: the body exceeds the operation's limit. */
export class PayloadTooLargeError extends GemforgeError {}
/** 422 `INVALID_REQUEST`, `INVALID_REFERENCE`, `MODEL_UNAVAILABLE`, `CONTENT_REJECTED`. */
export class ValidationError extends GemforgeError {}
/** 5xx (502 `PROVIDER_ERROR`, 503 `WORKFLOW_UNAVAILABLE` …): keep the identity and back off. */
export class ServerError extends GemforgeError {}
/**
 * The request never got an answer (network failure). For a spending call the
 * outcome is unknown, unless the connection was `refused`.
 */
export class ConnectionError extends GemforgeError {
  /**
   * True when the server refused the connection (`ECONNREFUSED`): nothing
   * listens at the base URL and nothing was sent, so the outcome is known.
   * Node tells; a browser's fetch does not, so there it stays false.
   */
  get refused(): boolean {
    return hasErrorCode(this.cause, 'ECONNREFUSED');
  }
}

/** Whether `code` appears on an error, its causes, or the errors of an AggregateError (Node's fetch nests them). */
function hasErrorCode(error: unknown, code: string, depth = 0): boolean {
  if (!error || typeof error !== 'object' || depth > 5) return false;
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (e.code === code) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => hasErrorCode(inner, code, depth + 1))) return true;
  return hasErrorCode(e.cause, code, depth + 1);
}
/**
 * A text stream that carried an error frame (`code` from the frame) or ended
 * without `data: [DONE]` (`code` `STREAM_INCOMPLETE`). HTTP 200 alone does not
 * prove success: replay with the same `idempotencyKey` and body.
 */
export class StreamError extends GemforgeError {}

const BY_STATUS: Record<number, typeof GemforgeError> = {
  400: BadRequestError,
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
};

/** The error for a non-2xx response and its (already read) body. */
export function errorFromResponse(response: Response, body: unknown, idempotencyKey?: string): GemforgeError {
  const envelope = (body && typeof body === 'object' ? (body as { error?: { code?: unknown; message?: unknown } }).error : undefined) ?? {};
  const code = typeof envelope.code === 'string' ? envelope.code : undefined;
  const message =
    typeof envelope.message === 'string' ? envelope.message : `HTTP ${response.status}${typeof body === 'string' && body ? `: ${body.slice(0, 200)}` : ''}`;
  const Class = BY_STATUS[response.status] ?? (response.status >= 500 ? ServerError : GemforgeError);
  const retryHeader = response.headers.get('x-should-retry');
  return new Class({
    status: response.status,
    code,
    message,
    requestId: response.headers.get('x-request-id') ?? undefined,
    idempotencyKey,
    shouldRetry: retryHeader === null ? undefined : retryHeader === 'true',
    retryAfterMs: retryAfterMsOf(response.headers.get('retry-after')),
  });
}

/** `Retry-After` as ms: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMsOf(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** One-line hints, from the spec's Errors table ("required client behaviour"). */
export const ERROR_HINTS: Record<string, string> = {
  INVALID_API_KEY: 'The key is missing, malformed, expired or revoked: set GEMFORGE_API_KEY to a valid key (gf_ + 64 hex).',
  INSUFFICIENT_SCOPE: 'The key lacks the scope of this operation (read or generate): use a key with both scopes.',
  ACCOUNT_BLOCKED: 'Account access is blocked: contact support; do not switch keys to get around it.',
  ACCOUNT_UNAVAILABLE: 'Account setup is unfinished: finish it in the account settings.',
  NETWORK_BLOCKED:
    'The account does not accept requests from this network address: send from an address its policy allows; another key of the account does not help.',
  REGION_BLOCKED: 'The account does not accept requests from this region: another key of the account does not help.',
  API_KEY_LIMIT: "The key's monthly Gem cap cannot cover the reservation: lower the cost or raise the cap yourself (never automatically).",
  LLM_QUOTA_EXHAUSTED: 'The account LLM allowance or paid-Gem settings do not allow this: check the allowance or enable paid Gems.',
  INSUFFICIENT_GEMS: 'The account Gem balance cannot cover the reservation: add Gems or lower the cost.',
  PRICE_CHANGED: 'The quote exceeds maxGems: reduce the cost or allow a higher ceiling (--max-gems).',
  IDEMPOTENCY_CONFLICT: 'This Idempotency-Key was used with a different body: send the original body, or use a new key for new work.',
  REQUEST_UNCERTAIN: 'The outcome is pending or unknown: keep the same key and body and replay later with backoff; never send it as new work.',
  REQUEST_FAILED: 'The original request was definitively released: new generation needs a new Idempotency-Key.',
  REFERENCES_PROCESSING: 'A referenced asset is not ready yet: keep the key, wait until the asset is ready, then replay.',
  ANALYSIS_FAILED: 'The analysis could not be parsed (usage may be billed); a replay returns the same failure.',
  NOT_FOUND: 'The route or ID is wrong, or not owned by this key’s account.',
  INVALID_REQUEST: 'A field breaks the contract or a limit: fix the request (see /docs).',
  INVALID_REFERENCE: 'A referenced asset or voice is unknown, not owned, of the wrong kind or unusable: upload it again.',
  MODEL_UNAVAILABLE: 'The model ID is unknown, disabled or does not fit the operation: list models with `gemforge models`.',
  CONTENT_REJECTED:
    'Moderation refused the text of the request (nothing was charged): change what it asks for; rewording or switching keys does not help, and repeated refusals can block the account.',
  PROVIDER_ERROR: 'An upstream provider failed: keep the same key and replay later; a 5xx never permits a new key.',
  WORKFLOW_UNAVAILABLE: 'This workflow is unavailable: keep the same key and back off; a 5xx never permits a new key.',
  PROVIDER_UNAVAILABLE: 'The provider is unavailable: keep the same key and back off; a 5xx never permits a new key.',
  TEMPORARILY_UNAVAILABLE: 'The service is temporarily unavailable: keep the same key and back off.',
  STREAM_INCOMPLETE: 'The stream ended without [DONE]: the answer is incomplete; replay with the same key and body.',
};

/** The hint for a code, or a generic one by status. */
export function hintFor(code: string | undefined, status?: number): string {
  if (code && Object.hasOwn(ERROR_HINTS, code)) return ERROR_HINTS[code];
  if (status === 413) return 'The body exceeds the operation’s size limit: send less.';
  if (status === 400) return 'The request could not be parsed: check the JSON body.';
  if (status !== undefined && status >= 500) return 'Keep the same Idempotency-Key and back off; a 5xx never permits a new key.';
  if (status === undefined) return 'No answer reached the client: for a spending call, replay with the same Idempotency-Key.';
  return 'See the Errors table of the API reference (/docs).';
}
