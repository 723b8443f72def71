/** Idempotency record rows. */
import type { Knex } from 'knex';
import type { Db } from './db.ts';
import { execute, rowOf, rowParams } from './compiled.ts';

type Conn = Db | Knex.Transaction;

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

export async function findRecord(db: Conn, keyId: string, idemKey: string): Promise<IdempotencyRow | undefined> {
  return db('idempotency_records').where({ key_id: keyId, idem_key: idemKey }).first();
}

const RECORD_COLUMNS = [
  'key_id', 'idem_key', 'account_id', 'operation', 'fingerprint', 'state', 'ref', 'reservation_id', 'response_status', 'response_body', 'created_at', 'updated_at',
] as const satisfies ReadonlyArray<keyof IdempotencyRow>;

export async function insertRecord(db: Conn, row: IdempotencyRow): Promise<void> {
  await execute(db, 'idempotency-insert', (c, ...v) => c('idempotency_records').insert(rowOf(RECORD_COLUMNS, v)), rowParams(RECORD_COLUMNS, row));
}

/** Moves a record out of `from`; returns false when it was not in that state any more. */
export async function transitionRecord(
  db: Conn,
  keyId: string,
  idemKey: string,
  from: RecordState[],
  patch: Partial<Pick<IdempotencyRow, 'state' | 'ref' | 'reservation_id' | 'response_status' | 'response_body' | 'updated_at'>>,
): Promise<boolean> {
  const columns = (Object.keys(patch) as Array<keyof typeof patch>).filter((c) => patch[c] !== undefined); // as knex leaves them out
  const { changes } = await execute(
    db,
    `idempotency-transition:${from.length}:${columns.join(',')}`,
    (c, k, i, ...v) =>
      c('idempotency_records').where({ key_id: k, idem_key: i }).whereIn('state', v.slice(0, from.length)).update(rowOf(columns, v, from.length)),
    [keyId, idemKey, ...from, ...rowParams(columns, patch)],
  );
  return changes === 1;
}

export async function recordsInState(db: Conn, states: RecordState[]): Promise<IdempotencyRow[]> {
  return db('idempotency_records').whereIn('state', states).select('*');
}
