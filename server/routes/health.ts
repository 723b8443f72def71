/**
 * GET /healthz and GET /readyz: for load balancers and orchestrators, outside
 * the public contract (like /files and /docs; no bearer key, no Error envelope).
 * /healthz: the process answers. /readyz: the database answers, the blob store
 * is a writable directory, and the server is not draining — 200 `ready`, else
 * 503 `not-ready` with the checks, so a balancer stops sending new work while a
 * SIGTERM drains (issue 27, item 5).
 */
import { Router } from 'express';
import type { Db } from '../storage/db.ts';
import { checkBlobStore } from '../storage/blobs.ts';

export interface Lifecycle {
  /** Set when a shutdown starts: not ready, and every answer closes its connection. */
  draining: boolean;
}

const CHECK_TIMEOUT_MS = 2000;

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([work, new Promise<T>((_, reject) => setTimeout(() => reject(new Error('timed out')), CHECK_TIMEOUT_MS).unref())]);
}

async function check(work: () => Promise<unknown>): Promise<string> {
  try {
    await withTimeout(work());
    return 'ok';
  } catch (error) {
    return `failed: ${(error as Error).message}`.slice(0, 200);
  }
}

export function healthRouter(deps: { db: Db; dataDir: string; lifecycle: Lifecycle }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.set('cache-control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [database, storage] = await Promise.all([
      check(() => deps.db.raw('select 1')),
      check(() => checkBlobStore(deps.dataDir)),
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

/** While draining, every answer closes its connection, so keep-alive clients reconnect to an instance that is not stopping. */
export function closeWhileDraining(lifecycle: Lifecycle) {
  return (_req: unknown, res: { setHeader(name: string, value: string): void }, next: () => void) => {
    if (lifecycle.draining) res.setHeader('connection', 'close');
    next();
  };
}
