/**
 * Numbers the validator let through but no schema means: ±Infinity. Ajv's type
 * coercion turns a query value such as `1e400` or `Infinity` into Infinity and
 * then skips `minimum`/`maximum` (a known Ajv behaviour), and `JSON.parse` reads
 * `1e400` in a body as Infinity. Either would reach the domain (a knex OFFSET,
 * a price) and fail there as a 503. Runs right after the validator: a client's
 * mistake is 422 INVALID_REQUEST, like any other out-of-range field.
 */
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../errors.ts';

/** The path of the first non-finite number inside `value`, or undefined. */
export function nonFinitePath(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path;
  if (depth > 32 || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = nonFinitePath(inner, Array.isArray(value) ? `${path}[${key}]` : `${path}.${key}`, depth + 1);
    if (found) return found;
  }
  return undefined;
}

export function rejectNonFinite(req: Request, _res: Response, next: NextFunction): void {
  const where = nonFinitePath(req.query, 'query') ?? nonFinitePath(req.body, 'body');
  if (where) {
    next(new ApiError(422, 'INVALID_REQUEST', `Invalid request: ${where} must be a finite number within its documented range.`));
    return;
  }
  next();
}
