/**
 * Several middlewares as one Express layer. Every `app.use` is a layer that each
 * request walks: the router matches its path, processes its parameters, trims
 * the URL, calls it inside a try and watches what it returns. A task read walked
 * a dozen of them before the validator (request id, access log, drain, health,
 * files, docs, console, the body parsers, the upload paths, the missing key),
 * most of which pass it on at once. Here the first one's `next` calls the second
 * directly, and so on, with what the router guarantees kept: the middlewares run
 * in order, the first error (passed, thrown or a rejected promise) skips the rest
 * and goes to the layer's `next`, as it would skip the layers mounted after it.
 * `underPath` stands for `app.use(path, handler)`: the handler runs for that path
 * and those below it, compared as Express compares (case-insensitive, on a
 * segment boundary). Unlike Express it does not strip the path from `req.url`
 * while the handler runs, so it is only for handlers that do not read the URL.
 * Measured: docs/performance.md, "The framework's share of a request".
 */
import type { NextFunction, Request, Response } from 'express';

export type Middleware = (req: Request, res: Response, next: NextFunction) => unknown;

/** `handlers` in order as one middleware, each one's `next` the following handler; the first error goes to `next`. */
export function inOneLayer(...handlers: Middleware[]): Middleware {
  const count = handlers.length;
  return (req, res, next) => {
    let i = 0;
    const step = (error?: unknown): void => {
      if (error) return next(error);
      if (i === count) return next();
      const handler = handlers[i++]!;
      try {
        const result = handler(req, res, step);
        if (typeof (result as Promise<unknown> | undefined)?.then === 'function')
          (result as Promise<unknown>).then(undefined, (reason: unknown) => next(reason || new Error('Rejected promise')));
      } catch (thrown) {
        next(thrown);
      }
    };
    step();
  };
}

/** `handler` only for `path` and the paths below it, as `app.use(path, handler)` mounts it (without rewriting `req.url`). */
export function underPath(path: string, handler: Middleware): Middleware {
  const head = path.toLowerCase();
  const below = `${head}/`;
  return (req, res, next) => {
    const p = req.path;
    if (p.length < head.length) return next();
    const lower = p.toLowerCase();
    if (lower === head || lower.startsWith(below)) return handler(req, res, next);
    next();
  };
}
