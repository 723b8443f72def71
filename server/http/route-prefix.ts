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

/** The literal heads of a router's routes, or undefined when it has anything but routes of plain string paths. */
function headsOf(router: Router): string[] | undefined {
  const layers = (router as unknown as { stack: RouterLayer[] }).stack;
  const paths = layers.map((layer) => layer.route?.path);
  if (paths.length === 0 || !paths.every((p): p is string => typeof p === 'string')) return undefined;
  return [...new Set(paths.map(literalHead))];
}

const admits = (heads: string[] | undefined, req: Request) => {
  if (!heads) return true;
  const path = lowerPath(req);
  return heads.some((head) => path.startsWith(head));
};

/** `router`, entered only for the paths its routes can match (or always, when that cannot be known). */
export function byPrefix(router: Router): Router | ((req: Request, res: Response, next: NextFunction) => void) {
  const heads = headsOf(router);
  if (!heads) return router;
  return (req, res, next) => {
    if (admits(heads, req)) router(req, res, next);
    else next();
  };
}

/**
 * Several routers as one middleware: each entered, in order, only for the paths its routes can
 * match (as `byPrefix`); a router that passes the request on hands it to the next one that can,
 * and an error goes straight to `next`, as it would skip the routers mounted after it. The same as
 * mounting each with `byPrefix`, without an Express layer per router for every request to pass.
 */
export function byPrefixes(...routers: Router[]): (req: Request, res: Response, next: NextFunction) => void {
  const entries = routers.map((router) => ({ router, heads: headsOf(router) }));
  return (req, res, next) => {
    let i = 0;
    const onward = (error?: unknown): void => {
      if (error) return next(error);
      while (i < entries.length) {
        const { router, heads } = entries[i++]!;
        if (admits(heads, req)) {
          router(req, res, onward);
          return;
        }
      }
      next();
    };
    onward();
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
