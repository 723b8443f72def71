/**
 * The one mapping from the domain's errors (domain/errors.ts: a code and a
 * message) to what each door says: the HTTP status and Error envelope of both
 * APIs (public and console; the spec's table is the authority), and the admin
 * CLI's exit code and message. A domain code missing here fails the typecheck
 * (`satisfies Record<DomainCode, …>`); a code that reaches the mapping at run
 * time without an entry (a record written by another version) is answered as
 * any unexpected failure is, without its message.
 */
import { MAX_ACTIVE_KEYS } from '../domain/accounts.ts';
import { DomainError, type DomainCode } from '../domain/errors.ts';
import { ApiError, type ErrorStatus } from './api-error.ts';

interface HttpAnswer {
  status: ErrorStatus;
  /** The envelope's code when it is not the domain's own. */
  code?: string;
  /** The message when it is not the domain's own. */
  message?: (domain: string) => string;
}

/** An admin phrase ("the expiry must be in the future") said as a sentence to an account holder. */
const sentence = (phrase: string) => `${phrase[0]!.toUpperCase()}${phrase.slice(1)}.`;

const HTTP = {
  INVALID_API_KEY: { status: 401 },
  INSUFFICIENT_SCOPE: { status: 403 },
  ACCOUNT_BLOCKED: { status: 403 },
  ACCOUNT_UNAVAILABLE: { status: 403 },
  NETWORK_BLOCKED: { status: 403 },
  REGION_BLOCKED: { status: 403 },
  API_KEY_LIMIT: { status: 402 },
  LLM_QUOTA_EXHAUSTED: { status: 402 },
  INSUFFICIENT_GEMS: { status: 402 },
  PRICE_CHANGED: { status: 409 },
  IDEMPOTENCY_CONFLICT: { status: 409 },
  REQUEST_UNCERTAIN: { status: 409 },
  REQUEST_FAILED: { status: 409 },
  REFERENCES_PROCESSING: { status: 409 },
  ANALYSIS_FAILED: { status: 409 },
  NOT_FOUND: { status: 404 },
  INVALID_REQUEST: { status: 422 },
  INVALID_REFERENCE: { status: 422 },
  MODEL_UNAVAILABLE: { status: 422 },
  CONTENT_REJECTED: { status: 422 },
  // The spec: "413, optionally INVALID_REQUEST: payload too large".
  UPLOAD_TOO_LARGE: { status: 413, code: 'INVALID_REQUEST' },
  PROVIDER_ERROR: { status: 502 },
  PROVIDER_UNAVAILABLE: { status: 503 },
  TEMPORARILY_UNAVAILABLE: { status: 503 },
  SIGN_IN_FAILED: { status: 401 },
  SESSION_EXPIRED: { status: 401 },
  INVITE_INVALID: { status: 401 },
  TOO_MANY_ATTEMPTS: { status: 429 },
  INVALID_INPUT: { status: 422, code: 'INVALID_REQUEST', message: sentence },
  // The console's own words: the account holder has no CLI's account id to read.
  KEY_LIMIT: {
    status: 409,
    code: 'KEY_LIMIT_REACHED',
    message: () => `This account already has ${MAX_ACTIVE_KEYS} keys that are not revoked; revoke one first.`,
  },
  INVALID_SETTING: { status: 422, code: 'INVALID_REQUEST' },
} as const satisfies Record<DomainCode, HttpAnswer>;

/** What an unexpected failure answers: no detail of it leaves the server. */
export const unavailable = () => new ApiError(503, 'TEMPORARILY_UNAVAILABLE', 'The service is temporarily unavailable; retry later with the same identity.');

/** The HTTP answer to a domain error: its status, envelope code and message, `final` and `Retry-After` carried over. */
export function apiErrorOf(error: DomainError): ApiError {
  const answer: HttpAnswer | undefined = Object.hasOwn(HTTP, error.code) ? HTTP[error.code] : undefined;
  if (!answer) return unavailable();
  return new ApiError(answer.status, answer.code ?? error.code, answer.message ? answer.message(error.message) : error.message, {
    final: error.final,
    ...(error.retryAfterSeconds !== undefined && { retryAfterSeconds: error.retryAfterSeconds }),
  });
}

/** Any thrown value as an HTTP error when it is one the API answers (an ApiError, a domain error); undefined otherwise. */
export function answerOf(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (error instanceof DomainError) return apiErrorOf(error);
  return undefined;
}

/** Domain codes that are the operator's input refused: the admin CLI exits 2 (a usage error) and prints the message as it is. */
const CLI_INPUT_CODES: ReadonlySet<DomainCode> = new Set<DomainCode>(['INVALID_INPUT', 'KEY_LIMIT', 'INVALID_SETTING']);

/** The admin CLI's exit code and message (after "gemforge admin <command>: ") for a failure of a command. */
export function cliFailureOf(error: unknown): { exitCode: 1 | 2; message: string } {
  if (error instanceof DomainError && CLI_INPUT_CODES.has(error.code)) return { exitCode: 2, message: error.message };
  return { exitCode: 1, message: `failed: ${(error as Error)?.message ?? String(error)}` };
}
