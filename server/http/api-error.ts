/**
 * An HTTP answer that is an error: a status, the envelope's code and a message.
 * The domain never builds one (it throws domain errors, domain/errors.ts, which
 * error-map.ts turns into these); the middleware and the routers build them for
 * what only HTTP knows (a path nothing serves, a body that does not parse), and
 * the error middleware sends every one as the Error envelope.
 */
import { Refusal } from '../domain/errors.ts';

/** Statuses the spec allows an error response to carry (429: the account console's sign-in limit only). */
export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 413 | 422 | 429 | 502 | 503;

/**
 * 409 codes a client must not retry as they are: their response carries
 * `x-should-retry: false` (stock OpenAI-style SDKs retry every 409 otherwise).
 * REQUEST_UNCERTAIN and REFERENCES_PROCESSING are left retryable: the spec asks
 * for a replay of the same identity with backoff, which is what an SDK retry is.
 */
const NO_RETRY_CODES = new Set(['IDEMPOTENCY_CONFLICT', 'REQUEST_FAILED', 'PRICE_CHANGED', 'ANALYSIS_FAILED']);

export class ApiError extends Refusal {
  readonly status: ErrorStatus;
  readonly code: string | undefined;
  /** A retained, final outcome: retrying the same identity only returns it again. */
  readonly final: boolean;
  /** Seconds to wait before retrying the same identity (sent as `Retry-After`); a 503 without them gets the error mapping's default. */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: ErrorStatus, code: string | undefined, message: string, options: { final?: boolean; retryAfterSeconds?: number } = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.final = options.final === true;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** Whether a stock SDK should be told not to retry this response. */
  get shouldNotRetry(): boolean {
    return this.final || (this.status === 409 && this.code !== undefined && NO_RETRY_CODES.has(this.code));
  }

  /** The spec's Error envelope. */
  toEnvelope(): { error: { code?: string; message: string } } {
    return this.code === undefined ? { error: { message: this.message } } : { error: { code: this.code, message: this.message } };
  }
}
