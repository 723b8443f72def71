/**
 * Values the validator let through but nothing can mean or store, rejected right
 * after it as the client's mistake (never a 503 from deeper down):
 * - ±Infinity: Ajv's type coercion turns a query value such as `1e400` or
 *   `Infinity` into Infinity and then skips `minimum`/`maximum` (a known Ajv
 *   behaviour), and `JSON.parse` reads `1e400` in a body as Infinity; either would
 *   reach the domain (a knex OFFSET, a price).
 * - U+0000 in a string: Postgres text cannot hold it, so an ID, a prompt or a
 *   message with one fails in storage.
 * A bad path segment names nothing (404 NOT_FOUND); a bad field is 422 INVALID_REQUEST.
 */
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from './api-error.ts';

/** Whether `value` holds a non-finite number or a NUL-carrying string anywhere (no paths built: the common answer is no). */
export function holdsUnrepresentable(value: unknown, depth = 0): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value === 'string') return value.includes('\u0000');
  if (depth > 32 || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return false;
  for (const key in value) {
    if (Object.hasOwn(value, key) && holdsUnrepresentable((value as Record<string, unknown>)[key], depth + 1)) return true;
  }
  return false;
}

/** The path of the first non-finite number or NUL-carrying string inside `value`, and what is wrong there. */
export function unrepresentable(value: unknown, path: string, depth = 0): { path: string; problem: string } | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path, problem: 'must be a finite number within its documented range' };
  if (typeof value === 'string') return value.includes('\u0000') ? { path, problem: 'must not contain the NUL character (U+0000)' } : undefined;
  if (depth > 32 || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = unrepresentable(inner, Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`, depth + 1);
    if (found) return found;
  }
  return undefined;
}

export function rejectUnrepresentable(req: Request, _res: Response, next: NextFunction): void {
  if (req.path.includes('%00')) {
    next(new ApiError(404, 'NOT_FOUND', 'No such route: the path contains a NUL character.'));
    return;
  }
  // Most requests hold nothing unrepresentable: a scan without paths says so, and only a
  // request that does is searched again for where (and its Content-Type read).
  const query = holdsUnrepresentable(req.query);
  if (!query && !holdsUnrepresentable(req.body)) return next();
  // Multipart fields are checked by their own patterns (and a file sent as a text field carries binary).
  const body: unknown = req.is('multipart/form-data') ? undefined : req.body;
  const bad = (query ? unrepresentable(req.query, 'query') : undefined) ?? unrepresentable(body, 'body');
  next(bad ? new ApiError(422, 'INVALID_REQUEST', `Invalid request: ${bad.path} ${bad.problem}.`) : undefined);
}
