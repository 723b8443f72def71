/**
 * JSON body parsing whose failures wait for authentication: a request with a
 * bad key hears 401/403 and an unknown route 404 whatever its body, and only an
 * authenticated caller hears 400 (malformed JSON, undecodable encoding) or 413.
 * The bearer handler (http/auth.ts) reports `req.bodyError` after the key passed.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';

export function jsonBody(limit: number): RequestHandler {
  const parse = express.json({ limit });
  return (req: Request, res: Response, next: NextFunction) => {
    parse(req, res, (error?: unknown) => {
      if (error) {
        req.bodyError = error;
        // Nothing more of this body will be read: close the connection after the answer.
        // (Malformed framing, such as a bad chunk size, was already answered by the
        // client-error handler in http/client-error.ts: its headers are out.)
        if (!res.headersSent) res.setHeader('connection', 'close');
      }
      next();
    });
  };
}
