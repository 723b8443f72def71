/**
 * Gives every request an id, echoed in `x-request-id` on every response and in
 * every log line: a safe incoming one, else `req_` and 128 random bits in hex
 * (from the ids' pool of CSPRNG bytes: a UUID with its dashes cut out cost an
 * allocation more, per request).
 */
import type { NextFunction, Request, Response } from 'express';
import { randomHex } from '../domain/ids.ts';

const SAFE_ID = /^[A-Za-z0-9._:-]{8,128}$/;

export function requestId(req: Request, res: Response, next: NextFunction): void {
  const incoming = req.get('x-request-id');
  const id = incoming && SAFE_ID.test(incoming) ? incoming : `req_${randomHex(16)}`;
  req.id = id;
  res.setHeader('x-request-id', id);
  next();
}
