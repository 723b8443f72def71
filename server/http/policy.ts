/**
 * The policy step of the request flow (server/app.ts): after the validator (so
 * after the key, its scope, the network and region checks of http/auth.ts, and
 * the body's shape), before the routers (so before any idempotency claim or
 * reservation). It moderates the text of the operation's body; a refusal
 * leaves the identity unclaimed, so a replay is moderated, and refused, again.
 * An identity that already has a record (claimed when it passed moderation)
 * is left to the idempotency rules: a completed request replays its result
 * even if today's policy would refuse it, a changed body is a conflict.
 * A voice upload's transcript exists only once transcribed: the voices domain
 * moderates it there, through `screenTexts`.
 */
import type { NextFunction, Request, Response } from 'express';
import { readYamlFile } from '../yaml-file.ts';
import type { ModerationText } from '../providers/moderation/types.ts';
import { screen, type ModerationDeps } from '../domain/policy/moderation.ts';
import { textsFrom } from '../domain/policy/moderated-fields.ts';
import { identityRecordOf, principalOf } from './context.ts';
import type { AppDeps } from '../deps.ts';

/** What moderation needs, from the app's dependencies and configuration. */
export function moderationDeps({ db, clock, config, policies }: Pick<AppDeps, 'db' | 'clock' | 'config' | 'policies'>): ModerationDeps {
  return {
    db,
    clock,
    provider: policies.moderation,
    blockThreshold: config.moderationBlockThreshold,
    blockWindowSeconds: config.moderationBlockWindowSeconds,
  };
}

function operationOf(req: Request): string | undefined {
  return (req as Request & { openapi?: { schema?: { operationId?: string } } }).openapi?.schema?.operationId;
}

/**
 * Express middleware moderating the texts of every operation that carries some:
 * the fields the contract at `openapiPath` marks `x-moderated` (read once, here).
 */
export function policyStep(deps: ModerationDeps, openapiPath: string) {
  const textsOf = textsFrom(readYamlFile(openapiPath) as Record<string, unknown>);
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const operation = operationOf(req);
    const texts = req.method === 'POST' ? textsOf(operation, req.body) : [];
    if (texts.length === 0) return next();
    const principal = principalOf(req);
    // An identity that already has a record was moderated when claimed: the idempotency rules answer it.
    // The use case replays from the same read.
    const record = identityRecordOf(req, deps.db);
    const claimed = async () => record !== undefined && (await record.get()) !== undefined;
    try {
      await screen(deps, principal, operation!, texts, claimed);
      next();
    } catch (error) {
      next(error);
    }
  };
}

/** Moderation for texts a handler finds later (a voice's name and transcript), bound to the request's caller. */
export function screenTexts(deps: ModerationDeps, req: Request): (texts: ModerationText[]) => Promise<void> {
  return (texts) => screen(deps, principalOf(req), operationOf(req) ?? 'unknown', texts);
}
