/**
 * The domain's one error vocabulary: a code and a message, no HTTP status. The
 * use cases, the console's sign-in and the admin commands all throw these; one
 * mapping (server/http/error-map.ts) turns each code into the status and the
 * Error envelope of either API, and into the admin CLI's exit code, so a
 * domain rule never knows which door its refusal leaves by.
 *
 * Most codes are the spec's own and leave the API unchanged. A few are the
 * domain's and are renamed on the way out: an upload over its size limit, a
 * bad admin input, a key limit, a bad policy setting.
 */

export const DOMAIN_CODES = [
  // Access and identity (the spec's codes)
  'INVALID_API_KEY',
  'INSUFFICIENT_SCOPE',
  'ACCOUNT_BLOCKED',
  'ACCOUNT_UNAVAILABLE',
  'NETWORK_BLOCKED',
  'REGION_BLOCKED',
  // Money
  'API_KEY_LIMIT',
  'LLM_QUOTA_EXHAUSTED',
  'INSUFFICIENT_GEMS',
  'PRICE_CHANGED',
  // Replay rules
  'IDEMPOTENCY_CONFLICT',
  'REQUEST_UNCERTAIN',
  'REQUEST_FAILED',
  'REFERENCES_PROCESSING',
  'ANALYSIS_FAILED',
  // The request itself
  'NOT_FOUND',
  'INVALID_REQUEST',
  'INVALID_REFERENCE',
  'MODEL_UNAVAILABLE',
  'CONTENT_REJECTED',
  /** An upload over its size limit (the spec: 413, code INVALID_REQUEST). */
  'UPLOAD_TOO_LARGE',
  // Upstreams and capacity
  'PROVIDER_ERROR',
  'PROVIDER_UNAVAILABLE',
  'TEMPORARILY_UNAVAILABLE',
  // The account console's sign-in
  'SIGN_IN_FAILED',
  'SESSION_EXPIRED',
  'INVITE_INVALID',
  'TOO_MANY_ATTEMPTS',
  // Administration (the admin CLI and the console's key and account pages)
  /** An operator's or account holder's input refused: the message is a phrase, "no account with id …". */
  'INVALID_INPUT',
  /** An account already has its most non-revoked keys. */
  'KEY_LIMIT',
  /** A policy setting that cannot be read (a region list, a CIDR): the message is a sentence. */
  'INVALID_SETTING',
] as const;

export type DomainCode = (typeof DOMAIN_CODES)[number];

export interface DomainErrorOptions {
  /** A retained, final outcome: retrying the same identity only returns it again. */
  final?: boolean;
  /** Seconds to wait before retrying the same identity (a rate limit's own wait). */
  retryAfterSeconds?: number;
}

/**
 * An answer to the caller, not a fault: no stack trace is ever shown or logged
 * for one, so none is captured (it was a tenth of the cost of every 401). The
 * base of the domain's errors and of the HTTP layer's ApiError.
 */
export class Refusal extends Error {
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

export class DomainError extends Refusal {
  readonly code: DomainCode;
  readonly final: boolean;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: DomainCode, message: string, options: DomainErrorOptions = {}) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.final = options.final === true;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** Whether `code` is one of the domain's (a record written by an older version may carry another). */
export const isDomainCode = (code: unknown): code is DomainCode => typeof code === 'string' && (DOMAIN_CODES as readonly string[]).includes(code);

export const invalidRequest = (message: string) => new DomainError('INVALID_REQUEST', message);
export const notFound = (message = 'Not found.') => new DomainError('NOT_FOUND', message);
export const invalidApiKey = () => new DomainError('INVALID_API_KEY', 'The API key is missing, malformed, expired or revoked.');
/** An operator's or account holder's input refused (the admin CLI prints the phrase; the console says it as a sentence). */
export const invalidInput = (phrase: string) => new DomainError('INVALID_INPUT', phrase);
