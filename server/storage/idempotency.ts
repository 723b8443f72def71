/** Idempotency record rows. */
import { columnsOf, guardRefusal, query, rowOf, rowParams, statement, type Conn, type Value } from './engine/query.ts';

export type RecordState = 'pending' | 'completed' | 'released' | 'uncertain';

export interface IdempotencyRow {
  key_id: string;
  idem_key: string;
  account_id: string;
  operation: string;
  fingerprint: string;
  state: RecordState;
  ref: string | null;
  reservation_id: string | null;
  response_status: number | null;
  response_body: string | null;
  created_at: string;
  updated_at: string;
}

const recordByKey = statement.first<IdempotencyRow>('idempotency-record', (c, k, i) => c('idempotency_records').where({ key_id: k, idem_key: i }).first());

export async function findRecord(db: Conn, keyId: string, idemKey: string): Promise<IdempotencyRow | undefined> {
  return query(db, recordByKey, [keyId, idemKey]);
}

const RECORD_COLUMNS = [
  'key_id',
  'idem_key',
  'account_id',
  'operation',
  'fingerprint',
  'state',
  'ref',
  'reservation_id',
  'response_status',
  'response_body',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof IdempotencyRow>;

/**
 * The record's insert, the claim of its identity: its only outcome is whether the primary key refused it (a claim
 * made before). In a SQLite transaction it leaves with the held BEGIN in one round trip (engine/compiled.ts `executeChecked`).
 */
const recordInsert = statement.checked('idempotency-insert', (c, ...v) => c('idempotency_records').insert(rowOf(RECORD_COLUMNS, v)));

export async function insertRecord(db: Conn, row: IdempotencyRow): Promise<void> {
  await query(db, recordInsert, rowParams(RECORD_COLUMNS, row));
}

/** Moves a record out of `from`; returns false when it was not in that state any more. */
export async function transitionRecord(
  db: Conn,
  keyId: string,
  idemKey: string,
  from: RecordState[],
  patch: Partial<Pick<IdempotencyRow, 'state' | 'ref' | 'reservation_id' | 'response_status' | 'response_body' | 'updated_at'>>,
): Promise<boolean> {
  const columns = columnsOf(patch);
  const transition = statement.write(`idempotency-transition:${from.length}:${columns.join(',')}`, transitionOf(from.length, columns));
  const { changes } = await query(db, transition, [keyId, idemKey, ...from, ...rowParams(columns, patch)]);
  return changes === 1;
}

/** A record's move out of one of `states` states (the first parameters after its key), setting `columns`. */
const transitionOf =
  (states: number, columns: readonly string[]) =>
  (c: Conn, k: Value, i: Value, ...v: Value[]) =>
    c('idempotency_records')
      .where({ key_id: k, idem_key: i })
      .whereIn('state', v.slice(0, states))
      .update(rowOf(columns, v, states));

/**
 * `transitionRecord` as a guarded write (engine/query.ts): in a SQLite transaction it waits for the next statement
 * (the settlement's COMMIT, one round trip for all of it), and a record no longer in `from` fails the transaction
 * there with the refusal `RECORD_MOVED` (on Postgres it is checked at once).
 */
export async function transitionRecordAtCommit(
  db: Conn,
  keyId: string,
  idemKey: string,
  from: RecordState[],
  patch: Partial<Pick<IdempotencyRow, 'state' | 'ref' | 'response_status' | 'response_body' | 'updated_at'>>,
): Promise<void> {
  const columns = columnsOf(patch);
  const transition = statement.guarded(`idempotency-transition-guarded:${from.length}:${columns.join(',')}`, RECORD_MOVED, transitionOf(from.length, columns));
  await query(db, transition, [keyId, idemKey, ...from, ...rowParams(columns, patch)]);
}

/** What a refused `transitionRecordAtCommit` says (engine/query.ts `guardRefusal`). */
const RECORD_MOVED = 'idempotency record moved';

/** True when a transaction failed because a `transitionRecordAtCommit` found its record moved on. */
export const isRecordMoved = (error: unknown): boolean => guardRefusal(error) === RECORD_MOVED;

export async function recordsInState(db: Conn, states: RecordState[]): Promise<IdempotencyRow[]> {
  const inStates = statement.rows<IdempotencyRow>(`idempotency-records-in-state:${states.length}`, (c, ...s) =>
    c('idempotency_records').whereIn('state', s).select('*'),
  );
  return query(db, inStates, states);
}

/** Deletes a record still in one of `from` (an identity that did nothing, left free); false when it was not. */
export async function deleteRecord(db: Conn, keyId: string, idemKey: string, from: RecordState[]): Promise<boolean> {
  const remove = statement.write(`idempotency-delete:${from.length}`, (c, k, i, ...v) =>
    c('idempotency_records').where({ key_id: k, idem_key: i }).whereIn('state', v).delete(),
  );
  const { changes } = await query(db, remove, [keyId, idemKey, ...from]);
  return changes === 1;
}
