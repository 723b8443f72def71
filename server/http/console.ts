/**
 * The account console under /console, wired as its own little stack
 * beside the generation API: the page (routes/console-page.ts), then for
 * /console/api a JSON parser → its own express-openapi-validator instance on
 * openapi/console.yaml → the session and CSRF check → routes/console.ts → the
 * one error middleware on that contract. Nothing here reads a bearer key, and
 * nothing in the generation API reads the session cookie (spec, Authentication 2).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { AppDeps } from '../app.ts';
import { ApiError, notFound } from '../errors.ts';
import { resumeSession, sessionExpired, type SessionRow } from '../domain/console.ts';
import { consoleRouter } from '../routes/console.ts';
import { consolePageRouter, type ConsolePage } from '../routes/console-page.ts';
import { errorMiddleware } from './errors.ts';
import { STRICT_FORMATS } from './formats.ts';

export const SESSION_COOKIE = 'gemforge_console';
export const CONSOLE_SPEC = path.resolve(import.meta.dirname, '../../openapi/console.yaml');

/** The signed-in session of a request that passed `requireSession`. */
export function sessionOf(req: Request): SessionRow {
  if (!req.consoleSession) throw sessionExpired();
  return req.consoleSession;
}

/** One cookie's value from the Cookie header (no cookie-parser: one name is all the console reads). */
function cookie(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD']);

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

/**
 * Operations whose contract does not say `security: []` need a live session;
 * their state changes also need the session's CSRF token in `X-CSRF-Token`.
 */
function requireSession({ db, clock, config }: Pick<AppDeps, 'db' | 'clock' | 'config'>) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const security = (req as Request & { openapi?: { schema?: { security?: unknown[] } } }).openapi?.schema?.security;
    if (Array.isArray(security) && security.length === 0) return next();
    const token = cookie(req, SESSION_COOKIE);
    if (!token) throw new ApiError(401, 'SESSION_EXPIRED', 'Sign in first: this request carries no console session.');
    const session = await resumeSession(db, clock, config.consoleSession, token);
    if (!SAFE_METHODS.has(req.method) && !sameToken(req.get('x-csrf-token') ?? '', session.csrf_token)) {
      throw new ApiError(403, 'CSRF_TOKEN_INVALID', 'This change needs the session\'s CSRF token in the X-CSRF-Token header; reload the page and try again.');
    }
    req.consoleSession = session;
    next();
  };
}

/** The console API's router: its own validator on openapi/console.yaml, the session check, the routes. */
function consoleApi(deps: Pick<AppDeps, 'db' | 'clock' | 'config' | 'signer' | 'passwords'>): Router {
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
  api.use(consoleRouter(deps));
  api.use((_req: Request, _res: Response, next: NextFunction) => next(notFound('No such route.')));
  api.use(errorMiddleware(CONSOLE_SPEC));
  return api;
}

/**
 * The console's stack, entered only for /console and the paths under it. Its
 * API (a second validator with its compiled contract, ~29 MB of heap) is built
 * at the first console API request, not at start: a server whose console is
 * never used does not carry it.
 */
export function consoleStack(deps: Pick<AppDeps, 'db' | 'clock' | 'config' | 'signer' | 'passwords'>, page: ConsolePage | undefined) {
  let api: Router | undefined;
  const pageRouter = consolePageRouter(page, deps.config.publicBaseUrl);
  return (req: Request, res: Response, next: NextFunction): void => {
    // Every request passes here: only a path's head is lower-cased (Express matches paths case-insensitively).
    const p = req.path.slice(0, 13).toLowerCase();
    if (p === '/console/api' || p === '/console/api/') (api ??= consoleApi(deps))(req, res, next);
    else if (p === '/console' || p.startsWith('/console/') || req.path === '/favicon.ico') pageRouter(req, res, next);
    else next();
  };
}
