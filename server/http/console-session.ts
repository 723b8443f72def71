/**
 * The console's session: its cookie, the check that a request carries a live
 * one (and, for a change, the session's CSRF token), and the session a checked
 * request carries. Its own module, so the console's routes read the session
 * without importing the stack that mounts them.
 */
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { AppDeps } from '../deps.ts';
import { ApiError } from './api-error.ts';
import { resumeSession, sessionExpired, type SessionRow } from '../domain/console.ts';

export const SESSION_COOKIE = 'gemforge_console';

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
export function requireSession({ db, clock, config }: Pick<AppDeps, 'db' | 'clock' | 'config'>) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const security = (req as Request & { openapi?: { schema?: { security?: unknown[] } } }).openapi?.schema?.security;
    if (Array.isArray(security) && security.length === 0) return next();
    const token = cookie(req, SESSION_COOKIE);
    if (!token) throw new ApiError(401, 'SESSION_EXPIRED', 'Sign in first: this request carries no console session.');
    const session = await resumeSession(db, clock, config.consoleSession, token);
    if (!SAFE_METHODS.has(req.method) && !sameToken(req.get('x-csrf-token') ?? '', session.csrf_token)) {
      throw new ApiError(403, 'CSRF_TOKEN_INVALID', "This change needs the session's CSRF token in the X-CSRF-Token header; reload the page and try again.");
    }
    req.consoleSession = session;
    next();
  };
}
