/** Gives every request an id, echoed in `x-request-id` on every response and in every log line. */
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const SAFE_ID = /^[A-Za-z0-9._:-]{8,128}$/;

export function requestId(req: Request, res: Response, next: NextFunction): void {
  const incoming = req.get('x-request-id');
  const id = incoming && SAFE_ID.test(incoming) ? incoming : `req_${crypto.randomUUID().replaceAll('-', '')}`;
  req.id = id;
  res.setHeader('x-request-id', id);
  next();
}
