/**
 * GET /healthz and GET /readyz: for load balancers and orchestrators, outside
 * the public contract (like /files and /docs; no bearer key, no Error envelope).
 * /healthz: the process answers. /readyz: the database answers, the blob store
 * takes writes (the local blob directory, or the bucket — a shared one failed
 * only after consecutive failed checks — and DATA_DIR/tmp writable with free
 * space, domain/readiness.ts), and the server is not draining — 200 `ready`, else
 * 503 `not-ready` with the checks, so a balancer stops sending new work while a
 * SIGTERM drains.
 */
import { Router } from 'express';
import { ApiError } from '../http/api-error.ts';
import type { Logger } from '../logger.ts';
import { blobStoreWritable, databaseAnswers, type Blobs, type Db } from '../domain/readiness.ts';

export interface Lifecycle {
  /** Set when a shutdown starts: not ready, and every answer closes its connection. */
  draining: boolean;
}

const CHECK_TIMEOUT_MS = 2000;
const TIMED_OUT = 'timed out';

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([work, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(TIMED_OUT)), CHECK_TIMEOUT_MS).unref())]);
}

/**
 * `ok`, or `failed:` and whether it timed out. The error itself goes to the log, not the
 * answer: /readyz takes no key, and a storage or database error's text names paths, hosts
 * and users.
 */
async function check(what: string, work: () => Promise<unknown>, logger: Logger): Promise<string> {
  try {
    await withTimeout(work());
    return 'ok';
  } catch (err) {
    logger.warn({ err, check: what }, `readiness check failed: ${what}`);
    return (err as Error).message === TIMED_OUT ? `failed: ${TIMED_OUT}` : 'failed: see the server log';
  }
}

export function healthRouter(deps: { db: Db; blobs: Blobs; lifecycle: Lifecycle; logger: Logger }): Router {
  const router = Router();
  const storageWritable = blobStoreWritable(deps.blobs);
  router.get('/healthz', (_req, res) => {
    res.set('cache-control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [database, storage] = await Promise.all([
      check('database', () => databaseAnswers(deps.db), deps.logger),
      check(
        'storage',
        () =>
          storageWritable((err, consecutive) =>
            deps.logger.warn({ err, check: 'storage', consecutive }, 'readiness: the object store check failed; still ready until it fails again'),
          ),
        deps.logger,
      ),
    ]);
    const draining = deps.lifecycle.draining;
    const ready = database === 'ok' && storage === 'ok' && !draining;
    res
      .status(ready ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: ready ? 'ready' : 'not-ready', checks: { database, storage, draining } });
  });
  return router;
}

/** Seconds a refused client is asked to wait before it sends the same request again (to another instance, through the balancer). */
const DRAIN_RETRY_AFTER_SECONDS = 1;

/**
 * While draining: every answer closes its connection, so keep-alive clients
 * reconnect to an instance that is not stopping; and a request that would start
 * new work (anything but GET and HEAD: submissions, uploads, chat completions,
 * extraction) is refused with 503 TEMPORARILY_UNAVAILABLE and `Retry-After`,
 * before any body is read or identity claimed: the client sends the same
 * request, with the same Idempotency-Key, to another instance. Reads (task
 * polls, downloads, /readyz) are still answered, and requests that arrived
 * before the drain run to their end. One check per request otherwise.
 */
export function whileDraining(lifecycle: Lifecycle) {
  return (req: { method: string }, res: { setHeader(name: string, value: string): void }, next: (error?: unknown) => void) => {
    if (!lifecycle.draining) return next();
    res.setHeader('connection', 'close');
    if (req.method === 'GET' || req.method === 'HEAD') return next();
    next(
      new ApiError(
        503,
        'TEMPORARILY_UNAVAILABLE',
        'This instance is shutting down and takes no new work; send the same request (same Idempotency-Key) again.',
        { retryAfterSeconds: DRAIN_RETRY_AFTER_SECONDS },
      ),
    );
  };
}
