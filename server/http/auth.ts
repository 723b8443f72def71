/**
 * The bearer security handler for express-openapi-validator. It parses
 * `Authorization: Bearer <key>` itself (the validator's own check is loose) and
 * resolves the key and scope through the accounts domain, then the account's
 * network and region policies for the client address (`req.ip`: the socket's,
 * or X-Forwarded-For's through the proxies TRUST_PROXY names).
 */
import type { Request } from 'express';
import type { Db } from '../storage/db.ts';
import type { Clock } from '../domain/clock.ts';
import { authenticate, KeyUses, type Scope } from '../domain/accounts.ts';
import { PrincipalCache } from '../domain/principal-cache.ts';
import { ApiError } from './api-error.ts';
import { bodyErrorOf } from './errors.ts';
import { answerOf } from './error-map.ts';
import { checkAccess } from '../domain/policy/access.ts';
import { NO_REGIONS, type RegionMap } from '../domain/policy/regions.ts';

// The scheme is case-insensitive (RFC 9110 §11.1); the key itself is not.
const BEARER = /^Bearer +([^\s]+) *$/i;

export function bearerHandler(db: Db, clock: Clock, prefix: string, regions: RegionMap = NO_REGIONS) {
  const cache = new PrincipalCache();
  const uses = new KeyUses(db, clock);
  return async (req: Request, scopes: string[]): Promise<boolean> => {
    const match = BEARER.exec(req.get('authorization') ?? '');
    try {
      const scope = scopes[0] as Scope | undefined;
      const principal = await authenticate(db, clock, prefix, match?.[1], scope, cache);
      checkAccess(principal.account, () => req.ip, regions);
      req.principal = principal;
      uses.note(principal.key.id, (err: unknown) => req.log?.warn({ err }, "a key's last use could not be recorded; the request is not affected"));
    } catch (error) {
      const refusal = answerOf(error);
      if (refusal) {
        req.authError = refusal;
        throw { status: refusal.status, message: refusal.message };
      }
      // A database failure is not the caller's fault: answer 503, never 401.
      req.authError = new ApiError(503, 'TEMPORARILY_UNAVAILABLE', 'The service is temporarily unavailable; retry later.');
      req.log?.error({ err: error }, 'authentication failed unexpectedly');
      throw { status: 500, message: 'unavailable' };
    }
    if (req.bodyError !== undefined) {
      // The caller is known: now the body's own problem (400/413) is theirs to hear.
      req.authError = bodyErrorOf(req.bodyError, req) ?? new ApiError(400, 'INVALID_REQUEST', 'The request body could not be read.');
      throw { status: req.authError.status, message: req.authError.message };
    }
    return true;
  };
}
