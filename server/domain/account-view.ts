/**
 * An account as its owner and operator see it: its money picture in the current
 * UTC month and each key's spend (charges plus outstanding reservations, what a
 * key's cap limits). `gemforge admin account show` and the console's account and
 * key views both start from it.
 */
import type { Db } from '../storage/db.ts';
import type { Clock } from './clock.ts';
import { describeKey, listKeys, requireAccount } from './accounts.ts';
import { accountSummary } from './ledger.ts';
import { listReservations } from '../storage/ledger.ts';
import { listUploads } from '../storage/assets.ts';
import { listAccountVoices } from '../storage/voices.ts';
import { decodeCursor, pageOf } from './paging.ts';

export async function accountOverview(db: Db, clock: Clock, id: string) {
  const account = await requireAccount(db, id);
  const keys = await listKeys(db, id);
  const summary = await accountSummary(db, clock, id, keys.map((k) => k.id));
  return {
    account,
    summary,
    /** The fields both views show, in this order. */
    fields: {
      id: account.id,
      name: account.name,
      state: account.state,
      balance: summary.balance,
      llmAllowance: account.llm_allowance,
      llmAllowanceUsed: summary.llmAllowanceUsed,
      paidConsent: account.paid_consent,
      month: summary.month,
    },
    keys: keys.map((k) => ({ ...describeKey(k), spendThisMonth: summary.keySpendThisMonth[k.id] ?? 0 })),
  };
}

/**
 * A page of the account's text and extraction charges (their reservations),
 * newest first: what was held, charged and released, and what it paid for.
 */
export async function listLlmCharges(db: Db, accountId: string, page: { cursor?: string | undefined; limit: number }) {
  const { rows, next } = pageOf(await listReservations(db, accountId, 'llm', decodeCursor(page.cursor), page.limit + 1), page.limit);
  const charges = rows.map((r) => ({
    id: r.id,
    ref: r.ref,
    keyId: r.key_id,
    state: r.state,
    heldGems: r.hold_allowance + r.hold_paid,
    chargedGems: r.charged,
    releasedGems: r.released,
    createdAt: r.created_at,
    settledAt: r.settled_at,
  }));
  return { charges, next };
}

type Page = { cursor?: string | undefined; limit: number };

/** A page of the assets the account uploaded, newest first (outputs show with their tasks). */
export async function listUploadedAssets(db: Db, accountId: string, page: Page) {
  const { rows, next } = pageOf(await listUploads(db, accountId, decodeCursor(page.cursor), page.limit + 1), page.limit);
  const uploads = rows.map((a) => ({
    id: a.id,
    kind: a.kind,
    mimeType: a.mime_type,
    sizeBytes: a.size_bytes,
    filename: a.filename,
    state: a.state,
    createdAt: a.created_at,
    deletedAt: a.deleted_at,
  }));
  return { uploads, next };
}

/** A page of the account's own voices, newest first. */
export async function listOwnVoices(db: Db, accountId: string, page: Page) {
  const { rows, next } = pageOf(await listAccountVoices(db, accountId, decodeCursor(page.cursor), page.limit + 1), page.limit);
  const voices = rows.map((v) => ({ id: v.id, name: v.name, language: v.language, state: v.state, durationSeconds: v.duration_seconds, createdAt: v.created_at }));
  return { voices, next };
}
