/** Ledger rows (the running figures beside them are in balances.ts). Plain rows in, plain rows out. */
import type { Db } from './db.ts';
import { columnsOf, guardRefusal, query, rowOf, rowParams, statement, type Conn } from './engine/query.ts';
import { newestFirst, pageParams, pageShape, type PagePosition } from './paging.ts';

export type EntryType = 'credit' | 'hold' | 'post' | 'void';
export type ReservationState = 'held' | 'settled' | 'released';
export type Purpose = 'media' | 'llm';
/** What a reservation pays for: the usage view's kinds (migration 016). */
export type SpendKind = 'image' | 'video' | 'audio' | 'text' | 'extraction';

export interface ReservationRow {
  id: string;
  account_id: string;
  key_id: string | null;
  purpose: Purpose;
  kind: SpendKind;
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
const ENTRY_COLUMNS = ['account_id', 'key_id', 'reservation_id', 'type', 'allowance', 'paid', 'month', 'created_at', 'note'] as const satisfies ReadonlyArray<
  keyof EntryRow
>;
const RESERVATION_COLUMNS = [
  'id',
  'account_id',
  'key_id',
  'purpose',
  'kind',
  'ref',
  'hold_allowance',
  'hold_paid',
  'state',
  'charged',
  'released',
  'month',
  'created_at',
  'settled_at',
] as const satisfies ReadonlyArray<keyof ReservationRow>;

const entryInsert = statement.later('ledger-entry-insert', (c, ...v) => c('ledger_entries').insert(rowOf(ENTRY_COLUMNS, v)));

/** `n` entries in one statement (a settlement's post and void): compiled once per count, and it may wait as one entry does. */
const entriesInsert = (n: number) =>
  statement.later(`ledger-entries-insert:${n}`, (c, ...v) =>
    c('ledger_entries').insert(Array.from({ length: n }, (_, i) => rowOf(ENTRY_COLUMNS, v, i * ENTRY_COLUMNS.length))),
  );

/** Appends one entry or several (one statement). */
export async function insertEntry(db: Conn, entry: EntryRow | EntryRow[]): Promise<void> {
  const entries = Array.isArray(entry) ? entry : [entry];
  if (entries.some((e) => e.id !== undefined)) {
    // Rows with their ids (tools, tests): built at each call, as their columns vary.
    await query(
      db,
      statement.dynamic('ledger-entries-insert', (c) => c('ledger_entries').insert(entry)),
    );
    return;
  }
  if (entries.length === 0) return;
  if (entries.length === 1) await query(db, entryInsert, rowParams(ENTRY_COLUMNS, entries[0]!));
  else
    await query(
      db,
      entriesInsert(entries.length),
      entries.flatMap((e) => rowParams(ENTRY_COLUMNS, e)),
    );
}

const reservationInsert = statement.later('reservation-insert', (c, ...v) => c('reservations').insert(rowOf(RESERVATION_COLUMNS, v)));

export async function insertReservation(db: Conn, row: ReservationRow): Promise<void> {
  await query(db, reservationInsert, rowParams(RESERVATION_COLUMNS, row));
}

const reservationById = statement.first<ReservationRow>('reservation-by-id', (c, id) => c('reservations').where({ id }).first());

export async function findReservation(db: Conn, id: string): Promise<ReservationRow | undefined> {
  const row = await query(db, reservationById, [id]);
  return row ? toReservation(row) : undefined;
}

/** Moves a held reservation to its final state; returns false when it was no longer held. */
export async function closeReservation(
  db: Conn,
  id: string,
  patch: { state: ReservationState; charged: number; released: number; settled_at: string },
): Promise<boolean> {
  const { changes } = await query(db, reservationClose, [id, patch.state, patch.charged, patch.released, patch.settled_at]);
  return changes === 1;
}

const reservationClose = statement.write('reservation-close', (c, id, state, charged, released, settledAt) =>
  c('reservations').where({ id, state: 'held' }).update({ state, charged, released, settled_at: settledAt }),
);

/** What a refused `closeReservationAtCommit` says (engine/query.ts `guardRefusal`). */
const RESERVATION_CLOSED = 'reservation not held';

/** True when a transaction failed because a `closeReservationAtCommit` found its reservation no longer held. */
export const isReservationClosed = (error: unknown): boolean => guardRefusal(error) === RESERVATION_CLOSED;

const reservationCloseGuarded = statement.guarded('reservation-close-guarded', RESERVATION_CLOSED, reservationClose.build);

/**
 * `closeReservation` as a guarded write: in a SQLite transaction it waits for the COMMIT, and a reservation no
 * longer held fails the transaction there with the refusal `RESERVATION_CLOSED` (on Postgres it is checked at once).
 */
export async function closeReservationAtCommit(
  db: Conn,
  id: string,
  patch: { state: ReservationState; charged: number; released: number; settled_at: string },
): Promise<void> {
  await query(db, reservationCloseGuarded, [id, patch.state, patch.charged, patch.released, patch.settled_at]);
}

/** Gems still held by open reservations, split by pool. */
export async function outstanding(db: Conn, filter: { account_id?: string; key_id?: string }): Promise<{ allowance: number; paid: number; count: number }> {
  const columns = columnsOf(filter);
  const held = statement.first<{ allowance: unknown; paid: unknown; count: unknown }>(`reservations-outstanding:${columns}`, (c, ...v) =>
    c('reservations')
      .where({ ...rowOf(columns, v), state: 'held' })
      .select(c.raw('COALESCE(SUM(hold_allowance), 0) AS allowance'), c.raw('COALESCE(SUM(hold_paid), 0) AS paid'), c.raw('COUNT(*) AS count'))
      .first(),
  );
  const row = await query(db, held, rowParams(columns, filter));
  return { allowance: Number(row?.allowance ?? 0), paid: Number(row?.paid ?? 0), count: Number(row?.count ?? 0) };
}

const reservations = statement.rows<ReservationRow>('reservations-all', (c) => c('reservations').select('*').orderBy('created_at'));

export async function allReservations(db: Conn): Promise<ReservationRow[]> {
  return (await query(db, reservations)).map(toReservation);
}

const entries = statement.rows<EntryRow>('ledger-entries-all', (c) => c('ledger_entries').select('*').orderBy('id'));

export async function allEntries(db: Conn): Promise<EntryRow[]> {
  return (await query(db, entries)).map(toEntry);
}

/** An account's reservations of one purpose, newest first, after `before` when given. */
export async function listReservations(
  db: Db,
  accountId: string,
  purpose: Purpose,
  before: PagePosition | undefined,
  limit: number,
): Promise<ReservationRow[]> {
  const page = statement.rows<ReservationRow>(pageShape('reservations-page', before, limit), (c, account, p, ...position) =>
    newestFirst(c('reservations').where({ account_id: account, purpose: p }).select('*'), position, limit),
  );
  return (await query(db, page, [accountId, purpose, ...pageParams(before)])).map(toReservation);
}
