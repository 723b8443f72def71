/**
 * CORS for the API paths, for the origins the operator lists (`CORS_ORIGINS`):
 * a browser page served from one of them may call `/api/...` with a bearer key.
 *
 * - A listed origin gets its own origin back in `Access-Control-Allow-Origin`
 *   (never `*`: the calls carry an Authorization header) and can read the
 *   headers the client's retry rules need (`x-request-id`, `Retry-After`,
 *   `x-should-retry`). Its preflight (`OPTIONS` with
 *   `Access-Control-Request-Method`) is answered here with 204, before the key
 *   check and the validator, which would refuse an `OPTIONS` without a key.
 * - Any other origin gets no CORS headers, so the browser blocks the call; its
 *   preflight goes on to the ordinary 404 envelope, never an "allowed".
 * - `Vary: Origin` on every API answer while a list is set, so a shared cache
 *   never hands one origin's answer to another.
 *
 * Mounted on `/api` only: the console (`/console`) is same-origin by design (its
 * session cookie), and the docs page calls the API from its own origin.
 */
import type { NextFunction, Request, Response } from 'express';

const ALLOW_METHODS = 'GET, HEAD, POST';
/** The request headers the API and its client use (X-Request-Id: a caller's own id is echoed). */
const ALLOW_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Filename, X-Request-Id';
/** What a browser client must read to follow the spec's retry rules and to report a request. */
const EXPOSE_HEADERS = 'x-request-id, Retry-After, x-should-retry';
/** Browsers cap this (Chromium at 2 hours); ten minutes keeps a changed list effective soon. */
const MAX_AGE_SECONDS = '600';

/** The `/api` middleware for the configured origins; a no-op when none are listed. */
export function apiCors(origins: readonly string[]): (req: Request, res: Response, next: NextFunction) => void {
  const allowed = new Set(origins);
  return (req, res, next) => {
    if (allowed.size === 0) return next();
    res.vary('Origin');
    const origin = req.get('origin');
    if (origin === undefined || !allowed.has(origin)) return next();
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    if (req.method === 'OPTIONS' && req.get('access-control-request-method') !== undefined) {
      res.setHeader('Access-Control-Allow-Methods', ALLOW_METHODS);
      res.setHeader('Access-Control-Allow-Headers', ALLOW_HEADERS);
      res.setHeader('Access-Control-Max-Age', MAX_AGE_SECONDS);
      res.status(204).end();
      return;
    }
    next();
  };
}
