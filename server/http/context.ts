/** What the server attaches to a request as it passes through the middleware. */
import type { Principal } from '../domain/accounts.ts';
import type { ApiError } from './api-error.ts';
import type { Request } from 'express';
import type { Logger } from '../logger.ts';
import type { SessionRow } from '../domain/console.ts';
import { ApiError as ApiErrorClass } from './api-error.ts';
import { RecordRead } from '../domain/idempotency.ts';
import type { Db } from '../storage/db.ts';

declare global {
  namespace Express {
    interface Request {
      /** Request id (also in `x-request-id`). */
      id: string;
      /** A logger bound to this request's id. */
      log?: Logger;
      /** Set by the bearer security handler once the key passed every check. */
      principal?: Principal;
      /** The precise auth failure; express-openapi-validator keeps only its message. */
      authError?: ApiError;
      /** A body that could not be parsed, reported once the caller is authenticated (http/body.ts). */
      bodyError?: unknown;
      /** The account console's signed-in session (http/console-session.ts). */
      consoleSession?: SessionRow;
      /** The identity's record, read once for the request (`identityRecordOf`). */
      identityRecord?: RecordRead;
    }
  }
}

/** The authenticated caller; routes behind `security` always have one. */
export function principalOf(req: Request): Principal {
  if (!req.principal) throw new ApiErrorClass(401, 'INVALID_API_KEY', 'The API key is missing, malformed, expired or revoked.');
  return req.principal;
}

/**
 * The record of the request's identity (its key and Idempotency-Key), read at
 * most once however many steps ask (the policy step, the use case); undefined
 * without an Idempotency-Key.
 */
export function identityRecordOf(req: Request, db: Db): RecordRead | undefined {
  const idemKey = req.get('idempotency-key');
  if (idemKey === undefined) return undefined;
  return (req.identityRecord ??= new RecordRead(db, principalOf(req).key.id, idemKey));
}
