/**
 * Moderation of the text of a request, before anything is reserved or
 * dispatched (spec: Authentication 7, Errors, Extraction). The texts of each
 * operation come from its already-validated body (the fields the contract marks
 * `x-moderated`, moderated-fields.ts); the provider
 * decides with the account's content preference; a refusal leaves only a
 * moderation record and answers `422 CONTENT_REJECTED`. Refusals count per
 * account, not per key: `threshold` of them within `windowSeconds` block the
 * account (`403 ACCOUNT_BLOCKED` on every later request, whichever key) until
 * an operator runs `gemforge admin moderation clear`.
 *
 * Text the provider cannot judge (the embedded policy reads English only) leaves
 * a record too, cleared as it is written so that it never counts towards a
 * block; a `strict` account's request is refused (`422 CONTENT_REJECTED`, saying
 * why), a `standard` one's goes on.
 */
import { DomainError } from '../errors.ts';
import { inTransaction, type Db } from '../../storage/db.ts';
import { lockAccountRow } from '../../storage/accounts.ts';
import * as store from '../../storage/policies.ts';
import {
  ModerationUnavailableError,
  type ContentPreference,
  type ModerationFlag,
  type ModerationProvider,
  type ModerationText,
  type ModerationUnjudged,
} from '../../providers/moderation/types.ts';
import { LANGUAGE_NAMES } from '../../providers/moderation/language.ts';
import type { Principal } from '../accounts.ts';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import { invalidatePrincipals } from '../principal-cache.ts';

/** Seconds a caller refused while the moderation threads are full is told to wait: about what their queue takes to drain. */
const BUSY_RETRY_AFTER_SECONDS = 1;

export interface ModerationDeps {
  db: Db;
  clock: Clock;
  provider: ModerationProvider;
  /** Refusals within the window that block the account; 0: never. */
  blockThreshold: number;
  blockWindowSeconds: number;
}

/** Records text the provider could not judge, cleared at once: it is the preference's decision, never a strike. */
async function recordUnjudged(deps: ModerationDeps, principal: Principal, operation: string, provider: string, unjudged: ModerationUnjudged): Promise<void> {
  const now = deps.clock.now().toISOString();
  await store.insertModerationRecord(deps.db, {
    id: newId('mod'),
    account_id: principal.account.id,
    key_id: principal.key.id,
    operation,
    field: unjudged.field.slice(0, 200),
    categories: JSON.stringify([`unjudged:${unjudged.language}`]),
    provider,
    created_at: now,
    cleared_at: now,
  });
}

/** Records a refusal and, past the threshold, blocks the account; true when this refusal blocked it. */
async function recordRefusal(deps: ModerationDeps, principal: Principal, operation: string, provider: string, flag: ModerationFlag): Promise<boolean> {
  const now = deps.clock.now();
  const since = new Date(now.getTime() - deps.blockWindowSeconds * 1000).toISOString();
  return inTransaction(deps.db, async (trx) => {
    await lockAccountRow(trx, principal.account.id); // concurrent refusals count one after the other
    await store.insertModerationRecord(trx, {
      id: newId('mod'),
      account_id: principal.account.id,
      key_id: principal.key.id,
      operation,
      field: flag.field.slice(0, 200),
      categories: JSON.stringify(flag.categories).slice(0, 500),
      provider,
      created_at: now.toISOString(),
      cleared_at: null,
    });
    if (deps.blockThreshold === 0) return false;
    if ((await store.countRecentRecords(trx, principal.account.id, since)) < deps.blockThreshold) return false;
    return store.blockForModeration(trx, principal.account.id, now.toISOString());
  });
}

/**
 * Moderates `texts` for the caller's account; throws the refusal (or 502/503 when the provider fails).
 *
 * `claimed` says whether the request's identity (key + Idempotency-Key) already has a record. Such a
 * request was moderated when it was claimed: its replay, conflict or uncertainty is the idempotency
 * rules' to answer (a completed request replays its retained result), so neither a refusal under
 * today's policy nor an unavailable moderation service stands in its way. It is asked only when
 * the verdict would stop the request, so an allowed request costs no extra read.
 */
export async function screen(
  deps: ModerationDeps,
  principal: Principal,
  operation: string,
  texts: ModerationText[],
  claimed: () => Promise<boolean> = async () => false,
): Promise<void> {
  if (texts.length === 0) return;
  let verdict;
  try {
    verdict = await deps.provider.moderate({ texts, preference: principal.account.content_preference as ContentPreference });
  } catch (error) {
    if (!(error instanceof ModerationUnavailableError)) throw error;
    if (await claimed()) return;
    if (error.kind === 'busy') {
      throw new DomainError('TEMPORARILY_UNAVAILABLE', 'Too many long texts are being moderated right now; retry in a moment with the same identity.', {
        retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS,
      });
    }
    throw error.kind === 'unreachable'
      ? new DomainError('PROVIDER_UNAVAILABLE', 'The moderation service is unavailable; retry later with the same identity.')
      : new DomainError('PROVIDER_ERROR', 'The moderation service failed; retry later with the same identity.');
  }
  const flag = verdict.flagged;
  if (!flag && verdict.unjudged && !(await claimed())) {
    const { unjudged } = verdict;
    const preference = principal.account.content_preference as ContentPreference;
    await recordUnjudged(deps, principal, operation, verdict.provider, unjudged);
    if (preference === 'strict') {
      throw new DomainError(
        'CONTENT_REJECTED',
        `The content policy cannot judge ${unjudged.field}: it reads as ${LANGUAGE_NAMES[unjudged.language] ?? unjudged.language}, and the policy reads English only; ` +
          "this account's strict content preference refuses text it cannot judge. Nothing was reserved or charged.",
      );
    }
  }
  if (!flag || (await claimed())) return;
  const blocked = await recordRefusal(deps, principal, operation, verdict.provider, flag);
  if (blocked) invalidatePrincipals(); // the next request of any key of this account meets the block at once
  throw new DomainError(
    'CONTENT_REJECTED',
    `The content policy refuses ${flag.field} (${flag.categories.join(', ')}). Nothing was reserved or charged.` +
      (blocked ? ' Repeated refusals have blocked this account.' : ''),
  );
}

// ---------------------------------------------------------------- operators

/** A record as `gemforge admin moderation list` prints it (never the refused text itself). */
export function describeRecord(row: store.ModerationRecordRow) {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    operation: row.operation,
    field: row.field,
    categories: JSON.parse(row.categories) as string[],
    provider: row.provider,
    createdAt: row.created_at,
    clearedAt: row.cleared_at,
  };
}

export async function listRecords(db: Db, q: { accountId?: string | undefined; all?: boolean; limit?: number }) {
  const rows = await store.listModerationRecords(db, { accountId: q.accountId, all: q.all === true, limit: q.limit ?? 100 });
  return rows.map(describeRecord);
}

/** Clears an account's records and lifts a block they set; an operator's own block stays. */
export async function clearRecords(db: Db, clock: Clock, accountId: string): Promise<{ cleared: number; unblocked: boolean }> {
  const at = clock.now().toISOString();
  return inTransaction(db, async (trx) => {
    await lockAccountRow(trx, accountId);
    const cleared = await store.clearModerationRecords(trx, accountId, at);
    return { cleared, unblocked: await store.liftModerationBlock(trx, accountId, at) };
  }).finally(invalidatePrincipals);
}
