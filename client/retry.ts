/**
 * Retries of one logical spending operation, only where the spec permits them,
 * always with the same identity (the caller closes over one Idempotency-Key):
 *
 * - 503 (`WORKFLOW_UNAVAILABLE`, `PROVIDER_UNAVAILABLE`, `TEMPORARILY_UNAVAILABLE`)
 *   and 502 `PROVIDER_ERROR`: "keep the identity and back off";
 * - 409 `REQUEST_UNCERTAIN`: "keep the original key, body and identity; replay with backoff";
 * - 409 `REFERENCES_PROCESSING`: "keep the identity", after waiting for the references;
 * - a network failure: the outcome is unknown, so a replay of the same identity is the safe check
 *   (not a refused connection: nothing was sent and no server listens, so waiting a few seconds
 *   does not help; the error still carries the identity).
 *
 * The wait is the schedule's, or the server's `Retry-After` when that is longer (up to a minute).
 *
 * Never: `IDEMPOTENCY_CONFLICT`, `REQUEST_FAILED`, `PRICE_CHANGED`, `ANALYSIS_FAILED`,
 * 402, 4xx validation, or anything the server marks `x-should-retry: false`.
 * When the attempts run out the last error is thrown with the identity attached.
 * Browser-safe.
 */
import { ConnectionError, GemforgeError } from './errors.ts';

export interface RetryPolicy {
  /** Attempts in all, the first included (default 4; 1 turns retries off). */
  maxAttempts?: number;
  /** Base delays between attempts in ms; the last repeats (default 1 s, 2 s, 4 s, 8 s). */
  delaysMs?: number[];
  /** Base delays while references are processing (default 2 s, 4 s, 8 s, 15 s). */
  referencesDelaysMs?: number[];
  /** Jitter as a fraction of each delay, ± (default 0.2). */
  jitter?: number;
  /** Sleep (injectable for tests); must reject when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Called before each retry (for logs and progress). */
  onRetry?: (info: { attempt: number; delayMs: number; error: GemforgeError }) => void;
}

export const DEFAULT_RETRY: Required<Omit<RetryPolicy, 'onRetry'>> = {
  maxAttempts: 4,
  delaysMs: [1000, 2000, 4000, 8000],
  referencesDelaysMs: [2000, 4000, 8000, 15000],
  jitter: 0.2,
  sleep: abortableSleep,
};

/** The longest `Retry-After` honoured between two attempts (a longer one waits this long). */
const MAX_RETRY_AFTER_MS = 60_000;

/** Why an error may be retried with the same identity, or undefined when it may not. */
export function retryReason(error: unknown): 'unavailable' | 'uncertain' | 'references' | 'network' | undefined {
  if (!(error instanceof GemforgeError)) return undefined;
  if (error.shouldRetry === false) return undefined;
  if (error instanceof ConnectionError) return error.refused ? undefined : 'network';
  if (error.status === 503 || error.status === 502) return 'unavailable';
  if (error.status === 409 && error.code === 'REQUEST_UNCERTAIN') return 'uncertain';
  if (error.status === 409 && error.code === 'REFERENCES_PROCESSING') return 'references';
  return undefined;
}

/** `base` ± `jitter`·`base`, never negative. */
export function jittered(base: number, jitter: number, random: () => number = Math.random): number {
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}

/** The n-th delay of a schedule (0-based); the last one repeats. */
export function delayAt(schedule: number[], n: number): number {
  return schedule[Math.min(n, schedule.length - 1)] ?? 0;
}

/**
 * Runs `attempt` until it succeeds, fails in a way that must not be retried, or
 * the attempts run out. Every error thrown out of here carries `idempotencyKey`
 * and `attempts`.
 */
export async function withRetries<T>(
  idempotencyKey: string,
  policy: RetryPolicy | undefined,
  signal: AbortSignal | undefined,
  attempt: () => Promise<T>,
): Promise<T> {
  const p = { ...DEFAULT_RETRY, ...policy };
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (error) {
      if (error instanceof GemforgeError) {
        error.idempotencyKey = idempotencyKey;
        error.attempts = n;
      }
      const reason = retryReason(error);
      if (!reason || n >= p.maxAttempts || signal?.aborted) throw error;
      const schedule = reason === 'references' ? p.referencesDelaysMs : p.delaysMs;
      // The server's Retry-After when it asks for longer (an overload or an outage), never shorter
      // than the schedule (a `Retry-After: 0` does not make back-to-back calls), at most a minute.
      const asked = error instanceof GemforgeError ? (error.retryAfterMs ?? 0) : 0;
      const delayMs = Math.max(jittered(delayAt(schedule, n - 1), p.jitter), Math.min(asked, MAX_RETRY_AFTER_MS));
      p.onRetry?.({ attempt: n, delayMs, error: error as GemforgeError });
      await p.sleep(delayMs, signal);
    }
  }
}

/** setTimeout as a promise that rejects with the signal's reason on abort. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
