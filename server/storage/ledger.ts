/** Ledger rows (the running figures beside them are in balances.ts). Plain rows in, plain rows out. */
import type { Knex } from 'knex';
import type { Db } from './db.ts';
import { executeLater, rowOf, rowParams } from './compiled.ts';
import { newestFirst, type PagePosition } from './paging.ts';

type Conn = Db | Knex.Transaction;

export type EntryType = 'credit' | 'hold' | 'post' | 'void';
export type ReservationState = 'held' | 'settled' | 'released';
export type Purpose = 'media' | 'llm';

export interface ReservationRow {
  id: string;
  account_id: string;
  key_id: string | null;
  purpose: Purpose;
  ref: string | null;
  hold_allowance: number;
  hold_paid: number;
  state: ReservationState;
  charged: number;
  released: number;
  month: string;
  created_at: string;
  settled_at: string | null;
}

export interface EntryRow {
  id?: number;
  account_id: string;
  key_id: string | null;
  reservation_id: string | null;
  type: EntryType;
  allowance: number;
  paid: number;
  month: string;
  created_at: string;
  note: string | null;
}

// Amounts as numbers whatever the driver hands back (Postgres bigint/numeric arrive as text unless parsed).
function toReservation(row: ReservationRow): ReservationRow {
  return { ...row, hold_allowance: Number(row.hold_allowance), hold_paid: Number(row.hold_paid), charged: Number(row.charged), released: Number(row.released) };
}

function toEntry(row: EntryRow): EntryRow {
  return { ...row, allowance: Number(row.allowance), paid: Number(row.paid) };
}

/** Appends one entry or several (one statement). */
const ENTRY_COLUMNS = ['account_id', 'key_id', 'reservation_id', 'type', 'allowance', 'paid', 'month', 'created_at', 'note'] as const satisfies ReadonlyArray<keyof EntryRow>;
const RESERVATION_COLUMNS = [
  'id', 'account_id', 'key_id', 'purpose', 'ref', 'hold_allowance', 'hold_paid', 'state', 'charged', 'released', 'month', 'created_at', 'settled_at',
] as const satisfies ReadonlyArray<keyof ReservationRow>;

/** Appends one entry or several (one statement). */
export async function insertEntry(db: Conn, entry: EntryRow | EntryRow[]): Promise<void> {
  if (Array.isArray(entry) || entry.id !== undefined) {
    await db('ledger_entries').insert(entry);
    return;
  }
  await executeLater(db, 'ledger-entry-insert', (c, ...v) => c('ledger_entries').insert(rowOf(ENTRY_COLUMNS, v)), rowParams(ENTRY_COLUMNS, entry));
}

export async function insertReservation(db: Conn, row: ReservationRow): Promise<void> {
  await executeLater(db, 'reservation-insert', (c, ...v) => c('reservations').insert(rowOf(RESERVATION_COLUMNS, v)), rowParams(RESERVATION_COLUMNS, row));
}

export async function findReservation(db: Conn, id: string): Promise<ReservationRow | undefined> {
  const row = await db<ReservationRow>('reservations').where({ id }).first();
  return row ? toReservation(row) : undefined;
}

/** Moves a held reservation to its final state; returns false when it was no longer held. */
export async function closeReservation(
  db: Conn,
  id: string,
  patch: { state: ReservationState; charged: number; released: number; settled_at: string },
): Promise<boolean> {
  const n = await db('reservations').where({ id, state: 'held' }).update(patch);
  return n === 1;
}

/** Gems still held by open reservations, split by pool. */
export async function outstanding(
  db: Conn,
  filter: { account_id?: string; key_id?: string },
): Promise<{ allowance: number; paid: number; count: number }> {
  const row = await db('reservations')
    .where({ ...filter, state: 'held' })
    .select(
      db.raw('COALESCE(SUM(hold_allowance), 0) AS allowance'),
      db.raw('COALESCE(SUM(hold_paid), 0) AS paid'),
      db.raw('COUNT(*) AS count'),
    )
    .first();
  return { allowance: Number(row?.allowance ?? 0), paid: Number(row?.paid ?? 0), count: Number(row?.count ?? 0) };
}

export async function allReservations(db: Conn): Promise<ReservationRow[]> {
  return (await db<ReservationRow>('reservations').select('*').orderBy('created_at')).map(toReservation);
}

export async function allEntries(db: Conn): Promise<EntryRow[]> {
  return (await db<EntryRow>('ledger_entries').select('*').orderBy('id')).map(toEntry);
}

/** An account's reservations of one purpose, newest first, after `before` when given. */
export async function listReservations(db: Db, accountId: string, purpose: Purpose, before: PagePosition | undefined, limit: number): Promise<ReservationRow[]> {
  const rows: ReservationRow[] = await newestFirst(db('reservations').where({ account_id: accountId, purpose }).select('*'), before, limit);
  return rows.map(toReservation);
}
