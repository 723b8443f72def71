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
import { listReservations, type SpendKind } from '../storage/ledger.ts';
import { accountDays } from '../storage/balances.ts';
import { listUploads } from '../storage/assets.ts';
import { listAccountVoices } from '../storage/voices.ts';
import { decodeCursor, pageOf } from './paging.ts';

export async function accountOverview(db: Db, clock: Clock, id: string) {
  const account = await requireAccount(db, id);
  const keys = await listKeys(db, id);
  const summary = await accountSummary(
    db,
    clock,
    id,
    keys.map((k) => k.id),
  );
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
  const voices = rows.map((v) => ({
    id: v.id,
    name: v.name,
    language: v.language,
    state: v.state,
    durationSeconds: v.duration_seconds,
    createdAt: v.created_at,
  }));
  return { voices, next };
}

/** The kinds of work the usage view counts apart, in the order it shows them. */
export const SPEND_KINDS = ['image', 'video', 'audio', 'text', 'extraction'] as const satisfies readonly SpendKind[];
/** Days the usage view covers, today (UTC) included. */
export const USAGE_DAYS = 30;

const DAY_MS = 86_400_000;

/**
 * The account's usage as the console charts it, from running figures only: Gems
 * charged per UTC day and kind over the last USAGE_DAYS days (every day present,
 * zeros included, oldest first), and each key that is not revoked with this
 * month's spend beside its cap.
 */
export async function accountUsage(db: Db, clock: Clock, accountId: string) {
  const today = Math.floor(clock.now().getTime() / DAY_MS) * DAY_MS;
  const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const days = Array.from({ length: USAGE_DAYS }, (_, i) => ({
    day: dayOf(today - (USAGE_DAYS - 1 - i) * DAY_MS),
    gems: { image: 0, video: 0, audio: 0, text: 0, extraction: 0 } satisfies Record<SpendKind, number>,
  }));
  const byDay = new Map(days.map((d) => [d.day, d.gems]));
  const { summary, keys } = await accountOverview(db, clock, accountId);
  for (const row of await accountDays(db, accountId, days[0]!.day, days.at(-1)!.day)) {
    const gems = byDay.get(row.day);
    if (gems && (SPEND_KINDS as readonly string[]).includes(row.kind)) gems[row.kind as SpendKind] += row.posted;
  }
  return {
    month: summary.month,
    days,
    keys: keys.filter((k) => !k.revokedAt).map((k) => ({ id: k.id, name: k.name, hint: k.hint, monthlyCap: k.monthlyCap, spendThisMonth: k.spendThisMonth })),
  };
}
