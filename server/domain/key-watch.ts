/**
 * Access that outlives its authentication. A request is authenticated
 * once, when it arrives; a text stream or a long completion then runs for as long
 * as the provider takes. The spec: "Revocation or expiration stops all access",
 * while revocation "does not cancel provider work already begun". So an open
 * response watches its key: within one second of a revocation, an expiry or an
 * account block (made by this process, another server or the admin CLI), the
 * response ends with the refusal, and the generation goes on and settles as it
 * does when a client disconnects (its measured usage is billed).
 *
 * Watching costs one read per key per `WATCH_TTL_MS`, however many responses of
 * that key are open: they share a principal cache of their own, whose entries
 * are trusted for less time than the request path's.
 */
import type { Db } from '../storage/db.ts';
import { findKeyWithAccount } from '../storage/accounts.ts';
import { DomainError, invalidApiKey } from './errors.ts';
import { accessRefusal, type Principal } from './accounts.ts';
import type { Clock } from './clock.ts';
import { PrincipalCache } from './principal-cache.ts';

/** How often an open response looks at its key. */
export const WATCH_INTERVAL_MS = 200;
/** How long a watched key read from the database is trusted: interval + TTL + one read stays well inside a second. */
export const WATCH_TTL_MS = 200;

export interface KeyWatcher {
  /**
   * Watches `principal` until the returned `stop` is called; `onRefused` is called
   * once, with the error to end the response with, when access ends.
   */
  watch(principal: Principal, onRefused: (error: DomainError) => void): () => void;
}

/** What ends the response: the refusal, said as something that happened while it was open. */
function endedWith(refusal: DomainError): DomainError {
  const what = refusal.code === 'INVALID_API_KEY' ? 'The API key was revoked or expired' : refusal.message.replace(/\.$/, '');
  return new DomainError(refusal.code, `${what} while this response was open, so it ends here. The generation is not cancelled; its measured usage is billed.`);
}

export function keyWatcher(db: Db, clock: Clock, options: { intervalMs?: number; ttlMs?: number } = {}): KeyWatcher {
  const cache = new PrincipalCache(options.ttlMs ?? WATCH_TTL_MS);
  const intervalMs = options.intervalMs ?? WATCH_INTERVAL_MS;
  return {
    watch(principal, onRefused) {
      const hash = principal.key.secret_hash;
      let stopped = false;
      let checking = false;
      const check = async () => {
        if (checking || stopped) return;
        checking = true;
        try {
          const rows = await cache.lookup(hash, () => findKeyWithAccount(db, hash));
          const refusal = rows ? accessRefusal(rows, clock) : invalidApiKey();
          if (refusal && !stopped) {
            stop();
            onRefused(endedWith(refusal));
          }
        } catch {
          // The database did not answer: keep the response; the next tick asks again.
        } finally {
          checking = false;
        }
      };
      const timer = setInterval(() => void check(), intervalMs);
      timer.unref();
      const stop = () => {
        stopped = true;
        clearInterval(timer);
      };
      return stop;
    },
  };
}
