/**
 * `gemforge admin ledger verify`: recomputes everything from the append-only
 * rows, every running figure (storage/balances.ts) included, and reports every
 * broken invariant and every figure that differs from its recomputed value. Other modules (tasks, idempotency)
 * add their own checks through `extraChecks`.
 */
import { inTransaction, type Db, type Tx } from '../storage/db.ts';
import { readOneSnapshot } from '../storage/maintenance.ts';
import { allEntries, allReservations, type EntryRow } from '../storage/ledger.ts';
import { figureTables, type FigureTable } from '../storage/balances.ts';

export interface VerifyReport {
  ok: boolean;
  checked: { accounts: number; reservations: number; entries: number };
  problems: string[];
}

export type ExtraCheck = (db: Db | Tx) => Promise<string[]>;

/**
 * Checks every ledger invariant on one consistent snapshot of the database
 * (separate statements while workers settled reported false
 * problems): one read-only transaction, REPEATABLE READ on Postgres; on SQLite
 * (WAL) a transaction's reads see one snapshot.
 */
export async function verifyLedger(db: Db, extraChecks: ExtraCheck[] = []): Promise<VerifyReport> {
  return inTransaction(db, async (trx) => {
    await readOneSnapshot(trx);
    return verifyIn(trx, extraChecks);
  });
}

async function verifyIn(db: Tx, extraChecks: ExtraCheck[]): Promise<VerifyReport> {
  const reservations = await allReservations(db);
  const entries = await allEntries(db);
  const problems: string[] = [];
  const byReservation = new Map<string, EntryRow[]>();

  for (const e of entries) {
    if (!Number.isSafeInteger(e.allowance) || !Number.isSafeInteger(e.paid)) problems.push(`entry ${e.id}: amounts are not whole Gems`);
    if (e.type !== 'credit' && (e.allowance < 0 || e.paid < 0)) problems.push(`entry ${e.id}: negative ${e.type}`);
    if (e.type === 'credit' && (e.allowance !== 0 || e.reservation_id)) problems.push(`entry ${e.id}: a credit moves paid Gems only`);
    if (e.type !== 'credit') {
      if (!e.reservation_id) problems.push(`entry ${e.id}: ${e.type} without a reservation`);
      else byReservation.set(e.reservation_id, [...(byReservation.get(e.reservation_id) ?? []), e]);
    }
  }

  const known = new Set(reservations.map((r) => r.id));
  for (const id of byReservation.keys()) if (!known.has(id)) problems.push(`entries refer to unknown reservation ${id}`);

  for (const r of reservations) {
    const rows = byReservation.get(r.id) ?? [];
    const of = (t: string) => rows.filter((e) => e.type === t);
    const [holds, posts, voids] = [of('hold'), of('post'), of('void')];
    const where = `reservation ${r.id}`;
    if (holds.length !== 1) {
      problems.push(`${where}: ${holds.length} hold entries (expected 1)`);
      continue;
    }
    const hold = holds[0];
    if (hold.allowance !== r.hold_allowance || hold.paid !== r.hold_paid) problems.push(`${where}: hold entry differs from the reservation`);
    const total = r.hold_allowance + r.hold_paid;
    if (r.state === 'held') {
      if (posts.length || voids.length) problems.push(`${where}: held but already posted or voided`);
      if (r.charged !== 0 || r.released !== 0) problems.push(`${where}: held but shows charged/released amounts`);
      continue;
    }
    if (voids.length !== 1 || posts.length > 1) {
      problems.push(`${where}: settled ${posts.length + voids.length} times (expected once)`);
      continue;
    }
    const post = posts[0] ?? { allowance: 0, paid: 0 };
    const voided = voids[0];
    if (post.allowance + voided.allowance !== hold.allowance || post.paid + voided.paid !== hold.paid) {
      problems.push(`${where}: charge plus release differs from the hold`);
    }
    const charged = post.allowance + post.paid;
    if (charged > total) problems.push(`${where}: charge ${charged} exceeds the reservation ${total}`);
    if (r.charged !== charged || r.released !== voided.allowance + voided.paid) problems.push(`${where}: row amounts differ from its entries`);
    if (r.charged + r.released !== total) problems.push(`${where}: charged + released = ${r.charged + r.released}, reserved ${total}`);
    if (r.state === 'released' && r.charged !== 0) problems.push(`${where}: released but charged ${r.charged}`);
  }

  // Replay paid balances in order: no account may ever have gone below zero.
  const running = new Map<string, number>();
  for (const e of entries) {
    const delta = e.type === 'credit' ? e.paid : e.type === 'hold' ? -e.paid : e.type === 'void' ? e.paid : 0;
    const next = (running.get(e.account_id) ?? 0) + delta;
    running.set(e.account_id, next);
    if (next < 0) problems.push(`account ${e.account_id}: paid balance went to ${next} at entry ${e.id}`);
  }

  for (const table of await figureTables(db)) problems.push(...compareFigures(table));
  for (const check of extraChecks) problems.push(...(await check(db)));
  return {
    ok: problems.length === 0,
    checked: { accounts: running.size, reservations: reservations.length, entries: entries.length },
    problems,
  };
}

/**
 * Every stored running figure against its value recomputed from the ledger rows.
 * A row missing on either side counts as zeros (an account that never moved
 * Gems may have no row, or a row of zeros).
 */
function compareFigures(t: FigureTable): string[] {
  const id = (row: Record<string, unknown>) => t.keys.map((k) => String(row[k])).join(' ');
  const rows = new Map<string, { stored?: Record<string, unknown>; recomputed?: Record<string, unknown> }>();
  for (const row of t.stored) rows.set(id(row), { stored: row });
  for (const row of t.recomputed) rows.set(id(row), { ...rows.get(id(row)), recomputed: row });
  const problems: string[] = [];
  for (const [name, { stored, recomputed }] of rows) {
    for (const f of t.figures) {
      const [s, r] = [Number(stored?.[f] ?? 0), Number(recomputed?.[f] ?? 0)];
      if (s !== r) problems.push(`${t.table} ${name}: ${f} is ${s}, the ledger rows give ${r}`);
    }
  }
  return problems;
}
