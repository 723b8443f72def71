/**
 * Calling a remote media provider. Every outcome of a call is one of three:
 * - *not done*: the request never reached the upstream (connection refused,
 *   name not found), or it answered 408, 429 or 503 (documented as "not
 *   processed, try again"): sent again with bounded exponential backoff, honouring
 *   `Retry-After`;
 * - *refused*: another 4xx: the slot fails at once, its Gems released;
 * - *unknown*: another 5xx (a gateway's 502 may come after the work was done),
 *   or a request sent and then lost (timeout, reset): sent again only where the
 *   upstream deduplicates it (a read, or an idempotency key it honours);
 *   otherwise the caller looks the work up where it can, or the task is held
 *   for an operator (UpstreamUnknown).
 * Keys travel only in headers and never appear in an error or a log line.
 * docs/providers.md has the table per provider.
 */
import { MediaGenerationError, MediaHoldError, type MediaJob, type MediaTools, type UpstreamErrorCounter } from '../media-types.ts';
import { readErrorText } from './body.ts';
import { NOT_PROCESSED } from './descriptor.ts';
import { say } from './sentences.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Errors from remote media providers by "provider kind" (retried, refused, lost,
 * unavailable), for /metrics: the composition root (server.ts) makes one per
 * process and hands it to the worker (MediaTools) and to the metrics.
 */
export class UpstreamErrorCounts implements UpstreamErrorCounter {
  readonly counts = new Map<string, number>();

  inc({ provider, kind }: { provider: string; kind: string }): void {
    const key = `${provider} ${kind}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

export interface CallOptions {
  /** Who is called, for messages ("the image provider"). */
  who: string;
  /** The provider's name, for the error metric. */
  provider?: string;
  /** Where the errors are counted (the job's `tools.upstreamErrors`). */
  errors?: UpstreamErrorCounter;
  /** Total time for the call and its retries. */
  deadlineMs: number;
  /** Per attempt. */
  attemptTimeoutMs: number;
  /** Attempts at most (the first one included). */
  attempts?: number;
  /** First backoff; doubles per attempt, at most `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** The provider's "not processed" answers (its descriptor's `failures.notDone`), sent again; default 408, 429, 503. */
  notDone?: readonly number[];
  /** Whether a request whose outcome is unknown (sent then lost, a 5xx other than 503) may be sent again: a read, or an idempotency key the upstream honours. */
  replayable: boolean;
  stopping(): boolean;
  /** The job's signal: aborted when the worker stops or loses the job, it cuts a request or body read at once. */
  signal?: AbortSignal | undefined;
  /** Called before each retry (for logs). */
  onRetry?(details: { attempt: number; status?: number; reason: string; waitMs: number }): void;
}

/** A definitive refusal by the upstream: the slot fails, its Gems are released. */
export class UpstreamRefusal extends MediaGenerationError {
  constructor(
    code: string,
    message: string,
    /** The upstream's status (401 or 403: it refused this deployment's credentials, not the request). */
    readonly status?: number,
  ) {
    super(code, message);
  }
}

/**
 * Retries or the deadline ran out while every attempt was certainly not
 * carried out (never sent, or answered "not processed"): the slot fails,
 * nothing charged, and another upstream may be asked instead.
 */
export class UpstreamNotDone extends MediaGenerationError {}

/**
 * A creating call whose outcome is unknown (sent and lost, or a 5xx that is not
 * 503): never sent again. Its answer's body, when there was one, lets a caller
 * look the work up (a prediction id); otherwise the task is held.
 */
export class UpstreamUnknown extends MediaHoldError {
  constructor(
    message: string,
    readonly body?: string,
  ) {
    super(message);
  }
}

/**
 * Answers documented as "not processed" (by default 429, rate limited; 503,
 * overloaded, try again; 408, not fully received). Any other 5xx may come from
 * a gateway after the upstream did the work.
 */
function notDone(status: number, documented: readonly number[] = NOT_PROCESSED): boolean {
  return documented.includes(status);
}

const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function networkCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: string; cause?: { code?: string } } })?.cause;
  return cause?.code ?? cause?.cause?.code;
}

/** `Retry-After` as milliseconds (seconds or an HTTP date), if present and sane. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The least time left for which an attempt is still started. */
const MIN_ATTEMPT_MS = 100;

/**
 * Sends `request()` while its answer says nothing was done (or, for a
 * replayable request, while the answer is unknown), within the deadline.
 * Returns the response of a 2xx; throws UpstreamRefusal for a refusal,
 * MediaGenerationError when retries or the deadline run out while nothing was
 * done upstream, UpstreamUnknown when a request that may not be replayed may
 * have been carried out.
 */
export async function callUpstream(request: (signal: AbortSignal) => Promise<Response>, options: CallOptions): Promise<Response> {
  const deadline = Date.now() + options.deadlineMs;
  const attempts = options.attempts ?? 6;
  let backoff = options.backoffMs ?? 500;
  let lastReason = 'no answer';
  // Whether every attempt so far certainly did nothing upstream (a replayable request may have been carried out).
  let nothingDone = true;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - Date.now();
    // An attempt with almost no time left could only time out, turning "nothing was done" into an
    // unknown outcome (a held task); a backoff timer firing a millisecond early left exactly that.
    if (left < MIN_ATTEMPT_MS || options.stopping()) break;
    let response: Response;
    // The attempt ends at its timeout, or as soon as the worker stops (the job is then left for recovery).
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new DOMException('timeout', 'TimeoutError')), Math.min(options.attemptTimeoutMs, left));
    const watch = setInterval(() => options.stopping() && controller.abort(new DOMException('stopping', 'AbortError')), 100);
    try {
      response = await request(attemptSignal(controller.signal, options.signal));
    } catch (error) {
      clearTimeout(timer);
      if (options.stopping()) throw new MediaGenerationError('GENERATION_FAILED', `${options.who} call interrupted: the worker is stopping`);
      const code = networkCode(error);
      const sent = !code || !NOT_SENT.has(code);
      lastReason = code ?? (controller.signal.aborted ? 'timeout' : 'connection lost');
      if (sent && !options.replayable) {
        options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'lost' });
        throw new UpstreamUnknown(`${options.who} did not answer a request it may have carried out (${lastReason}); its outcome cannot be known`);
      }
      if (sent) nothingDone = false;
      options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'retried' });
      if (attempt >= attempts) break;
      const waitMs = Math.min(backoff, options.maxBackoffMs ?? 8000, Math.max(0, deadline - Date.now()));
      options.onRetry?.({ attempt, reason: lastReason, waitMs });
      await sleep(waitMs);
      backoff *= 2;
      continue;
    } finally {
      clearInterval(watch);
    }
    // The timeout stays armed while the body is read (a body that never ends is cut at the attempt's timeout).
    timer.unref();
    if (response.ok) return response;
    // Read under the attempt's timer and the job's signal, and only its head: an error body that never ends is cut.
    const body = await readErrorText(response);
    clearTimeout(timer);
    if (!notDone(response.status, options.notDone) && response.status < 500) {
      options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'refused' });
      throw new UpstreamRefusal('GENERATION_FAILED', say.refused(options.who, response.status, body), response.status);
    }
    lastReason = `HTTP ${response.status}`;
    if (!notDone(response.status, options.notDone) && !options.replayable) {
      // A 500/502/504 to a creating call: the work may be done (and paid for); sending it again could do it twice.
      options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'lost' });
      throw new UpstreamUnknown(`${options.who} answered ${lastReason} to a request it may have carried out; its outcome cannot be known`, body);
    }
    if (!notDone(response.status, options.notDone)) nothingDone = false;
    options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'retried' });
    if (attempt >= attempts) break;
    const hinted = retryAfterMs(response.headers.get('retry-after'));
    // A hint shorter than our own backoff (`Retry-After: 0`) does not make back-to-back calls.
    const waitMs = Math.min(Math.max(hinted ?? 0, backoff), options.maxBackoffMs ?? 8000 * 4, Math.max(0, deadline - Date.now()));
    options.onRetry?.({ attempt, status: response.status, reason: lastReason, waitMs });
    await sleep(waitMs);
    backoff *= 2;
  }
  options.errors?.inc({ provider: options.provider ?? 'remote', kind: 'unavailable' });
  const Unavailable = nothingDone ? UpstreamNotDone : MediaGenerationError;
  throw new Unavailable('GENERATION_FAILED', say.unavailable(options.who, lastReason));
}

/** The attempt's own signal, joined with the job's (a stop or a lost lease cuts the request and its body). */
function attemptSignal(attempt: AbortSignal, job: AbortSignal | undefined): AbortSignal {
  return job ? AbortSignal.any([attempt, job]) : attempt;
}

/** A base URL without its trailing slash, and without a trailing /v1 (endpoints add it). */
export function baseOf(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

export interface PostOnceOptions {
  /** The provider's name, recorded with the slot. */
  provider: string;
  who: string;
  apiKey: string | undefined;
  /** The upstream honours `Idempotency-Key`: an interrupted call may be sent again with the same key. */
  idempotent: boolean;
  deadlineMs: number;
  attemptTimeoutMs: number;
  notDone?: readonly number[];
}

/**
 * One creating call to a synchronous upstream, exactly once per output slot:
 * a slot already asked before an interruption is held (unless the upstream
 * honours the `Idempotency-Key: gemforge-<task>-<slot>` sent with every call),
 * and the slot is recorded as `calling` before the request leaves.
 */
export async function postOnce(
  job: MediaJob,
  tools: MediaTools,
  endpoint: string,
  body: BodyInit,
  headers: Record<string, string>,
  options: PostOnceOptions,
): Promise<Response> {
  if ((await tools.remoteCalls.find(job.index)) && !options.idempotent) {
    throw new MediaHoldError(`${options.who} was asked for this output before the job was interrupted; whether it made (and charged) it cannot be known`);
  }
  const all: Record<string, string> = { ...headers, 'idempotency-key': `gemforge-${job.taskId}-${job.index}` };
  if (options.apiKey) all.authorization = `Bearer ${options.apiKey}`;
  await tools.remoteCalls.calling(job.index, options.provider);
  return callUpstream((signal) => fetch(endpoint, { method: 'POST', headers: all, body, signal }), {
    who: options.who,
    provider: options.provider,
    errors: tools.upstreamErrors,
    deadlineMs: options.deadlineMs,
    attemptTimeoutMs: options.attemptTimeoutMs,
    replayable: options.idempotent,
    ...(options.notDone && { notDone: options.notDone }),
    stopping: tools.stopping,
    signal: tools.signal,
    onRetry: (d) => tools.warn({ slot: job.index, ...d }, `${options.provider} retry`),
  });
}
