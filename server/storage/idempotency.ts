/** Idempotency record rows. */
import type { Knex } from 'knex';
import type { Db } from './db.ts';

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

export async function insertRecord(db: Conn, row: IdempotencyRow): Promise<void> {
  await db('idempotency_records').insert(row);
}

/** Moves a record out of `from`; returns false when it was not in that state any more. */
export async function transitionRecord(
  db: Conn,
  keyId: string,
  idemKey: string,
  from: RecordState[],
  patch: Partial<Pick<IdempotencyRow, 'state' | 'ref' | 'reservation_id' | 'response_status' | 'response_body' | 'updated_at'>>,
): Promise<boolean> {
  const n = await db('idempotency_records').where({ key_id: keyId, idem_key: idemKey }).whereIn('state', from).update(patch);
  return n === 1;
}

export async function recordsInState(db: Conn, states: RecordState[]): Promise<IdempotencyRow[]> {
  return db('idempotency_records').whereIn('state', states).select('*');
}
