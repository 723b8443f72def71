/**
 * One pace for every read this process sends to an asynchronous upstream.
 * Each job paces its own polls (`REPLICATE_POLL_MS`), but the upstream limits
 * the account, not the job: Replicate allows 3,000 requests a minute to every
 * endpoint but the creating one, and 64 remote jobs polling every second would
 * send 3,840. So every status read, result read and cancel first takes a token
 * from one bucket per upstream deployment (provider, base URL and key) in the
 * process, filled at `…_READS_PER_MINUTE`; a read waits its turn instead of
 * being throttled. A read the upstream throttles anyway (another process, the
 * same key used elsewhere) backs off and keeps the job (async-job.ts).
 */
import crypto from 'node:crypto';

/**
 * A token bucket of `perMinute` tokens a minute holding at most one second's
 * worth (so a minute never sees more than `perMinute` plus that second).
 * Tokens are reserved in arrival order: a caller is told how long to wait for
 * its own, and the bucket may go below zero by the tokens promised.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  readonly burst: number;
  constructor(
    readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.burst = Math.max(1, Math.floor(perMinute / 60));
    this.tokens = this.burst;
    this.last = now();
  }

  /** Reserves the next token; the milliseconds until it is due (0: now). */
  reserve(): number {
    const at = this.now();
    const perMs = this.perMinute / 60_000;
    this.tokens = Math.min(this.burst, this.tokens + (at - this.last) * perMs);
    this.last = at;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil(-this.tokens / perMs);
  }

  /** Waits for a token; the signal (a stopping worker, a lost job) ends the wait at once. */
  async take(signal?: AbortSignal): Promise<void> {
    const waitMs = this.reserve();
    if (waitMs === 0) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(done, waitMs);
      function done() {
        signal?.removeEventListener('abort', aborted);
        resolve();
      }
      function aborted() {
        clearTimeout(timer);
        reject(signal!.reason);
      }
      if (signal?.aborted) aborted();
      else signal?.addEventListener('abort', aborted, { once: true });
    });
  }
}

/**
 * The read buckets of upstream deployments: the same provider, base URL and
 * key share one whichever models (or deployments of a model) use them. The
 * key is kept only as a digest. Handed to the providers as a dependency
 * (`CommonRemoteOptions.readLimits`).
 */
export class ReadLimits {
  private readonly buckets = new Map<string, TokenBucket>();

  /** The bucket for reads of one upstream deployment. */
  limiter(provider: string, base: string, key: string | undefined, perMinute: number): TokenBucket {
    const id = `${provider} ${base} ${crypto
      .createHash('sha256')
      .update(key ?? '')
      .digest('hex')} ${perMinute}`;
    let bucket = this.buckets.get(id);
    if (!bucket) {
      bucket = new TokenBucket(perMinute);
      this.buckets.set(id, bucket);
    }
    return bucket;
  }
}

/**
 * The process's read buckets, which the composition root hands to every app
 * and worker it builds: the upstream limits the account and key, not an app,
 * so two apps in one process polling one key must share its budget (each with
 * its own would together spend it twice).
 */
export const processReadLimits = new ReadLimits();

/** The process's bucket for reads of an upstream deployment (`processReadLimits`). */
export function readLimiter(provider: string, base: string, key: string | undefined, perMinute: number): TokenBucket {
  return processReadLimits.limiter(provider, base, key, perMinute);
}

/** `fetch`, a read (`replayable`) first waiting its turn in `reads`; a creating call has its own limit and goes at once. */
export async function pacedFetch(reads: TokenBucket, replayable: boolean, url: string, init: RequestInit, signal: AbortSignal): Promise<Response> {
  if (replayable) await reads.take(signal);
  return fetch(url, { ...init, signal });
}
