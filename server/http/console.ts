/**
 * The account console under /console, wired as its own little stack
 * beside the generation API: the page (routes/console-page.ts), then for
 * /console/api a JSON parser → its own express-openapi-validator instance on
 * openapi/console.yaml → the session and CSRF check (console-session.ts) →
 * routes/console.ts (passed in by the wiring, app.ts) → the
 * one error middleware on that contract. Nothing here reads a bearer key, and
 * nothing in the generation API reads the session cookie (spec, Authentication 2).
 */
import path from 'node:path';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { AppDeps } from '../deps.ts';
import { notFound } from '../domain/errors.ts';
import { requireSession } from './console-session.ts';
import { errorMiddleware } from './errors.ts';
import { STRICT_FORMATS } from './formats.ts';

export const CONSOLE_SPEC = path.resolve(import.meta.dirname, '../../openapi/console.yaml');

/** The console API's router: its own validator on openapi/console.yaml, the session check, the routes. */
function consoleApi(deps: Pick<AppDeps, 'db' | 'clock' | 'config'>, routes: Router): Router {
  const api = Router();
  api.use(express.json({ limit: '16kb' }));
  api.use(
    OpenApiValidator.middleware({
      apiSpec: CONSOLE_SPEC,
      validateRequests: { allowUnknownQueryParameters: false },
      validateResponses: deps.config.validateResponses,
      validateSecurity: false, // the session is checked below, with the console's own answers
      validateFormats: true,
      formats: STRICT_FORMATS,
    }),
  );
  api.use(requireSession(deps));
  api.use(routes);
  api.use((_req: Request, _res: Response, next: NextFunction) => next(notFound('No such route.')));
  api.use(errorMiddleware(CONSOLE_SPEC));
  return api;
}

/** The console's routers, passed in by the wiring (app.ts): the page, and the API's routes (built with the API, at its first request). */
export interface ConsoleRouters {
  page: Router;
  api: () => Router;
}

/**
 * The console's stack, entered only for /console and the paths under it. Its
 * API (a second validator with its compiled contract, ~29 MB of heap) is built
 * at the first console API request, not at start: a server whose console is
 * never used does not carry it.
 */
export function consoleStack(deps: Pick<AppDeps, 'db' | 'clock' | 'config'>, routers: ConsoleRouters) {
  let api: Router | undefined;
  const pageRouter = routers.page;
  return (req: Request, res: Response, next: NextFunction): void => {
    // Every request passes here: only a path's head is lower-cased (Express matches paths case-insensitively).
    const p = req.path.slice(0, 13).toLowerCase();
    if (p === '/console/api' || p === '/console/api/') (api ??= consoleApi(deps, routers.api()))(req, res, next);
    else if (p === '/console' || p.startsWith('/console/') || req.path === '/favicon.ico') pageRouter(req, res, next);
    else next();
  };
}
