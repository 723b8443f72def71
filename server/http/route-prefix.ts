/**
 * Enters a router only for paths its routes can match, to save CPU per request. Express runs
 * every router mounted at `/` for every request: each one it enters sets up its
 * own dispatch and tries each of its routes, so a task read went through six
 * routers that could not answer it. `byPrefix` reads the router's routes once,
 * when the app is built, and lets a request in only when its path starts with the
 * literal head of one of them (the part before the first parameter), compared
 * case-insensitively as Express compares paths. That admits every path a route
 * can match (and a few more, which the router then refuses as before). A router
 * with anything but routes of plain string paths (`router.use`, a RegExp path) is
 * always entered.
 */
import type { NextFunction, Request, Response, Router } from 'express';

interface RouterLayer {
  route?: { path?: unknown };
}

/** The literal start of an Express route path: up to its first parameter, wildcard or group. */
export function literalHead(path: string): string {
  const end = path.search(/[:*{(?+\\]/);
  return (end < 0 ? path : path.slice(0, end)).toLowerCase();
}

/** `router`, entered only for the paths its routes can match (or always, when that cannot be known). */
export function byPrefix(router: Router): Router | ((req: Request, res: Response, next: NextFunction) => void) {
  const layers = (router as unknown as { stack: RouterLayer[] }).stack;
  const paths = layers.map((layer) => layer.route?.path);
  if (paths.length === 0 || !paths.every((p): p is string => typeof p === 'string')) return router;
  const heads = [...new Set(paths.map(literalHead))];
  return (req, res, next) => {
    const path = lowerPath(req);
    if (heads.some((head) => path.startsWith(head))) router(req, res, next);
    else next();
  };
}

const LOWER = Symbol('lower-cased path');
type Remembering = Request & { [LOWER]?: { url: string; path: string } };

/** The request's path in lower case, made once per request (and again only should its URL change) for all the guards it passes. */
function lowerPath(req: Remembering): string {
  const known = req[LOWER];
  if (known && known.url === req.url) return known.path;
  const path = req.path.toLowerCase();
  req[LOWER] = { url: req.url, path };
  return path;
}
