/**
 * Moderation records (a refused request leaves one, nothing else) and the
 * account block repeated refusals set. Plain rows in, plain rows out.
 */
import type { Knex } from 'knex';
import type { Db } from './db.ts';

type Conn = Db | Knex.Transaction;

export interface ModerationRecordRow {
  id: string;
  account_id: string;
  key_id: string;
  operation: string;
  field: string;
  categories: string; // JSON array
  provider: string;
  created_at: string;
  cleared_at: string | null;
}

export async function insertModerationRecord(db: Conn, row: ModerationRecordRow): Promise<void> {
  await db('moderation_records').insert(row);
}

/** Records of an account not cleared, created at or after `since`. */
export async function countRecentRecords(db: Conn, accountId: string, since: string): Promise<number> {
  const row = await db('moderation_records')
    .where({ account_id: accountId })
    .whereNull('cleared_at')
    .where('created_at', '>=', since)
    .count({ n: '*' })
    .first();
  return Number(row?.n ?? 0);
}

/** Newest first; only records not cleared unless `all`. */
export async function listModerationRecords(db: Conn, q: { accountId?: string | undefined; all: boolean; limit: number }): Promise<ModerationRecordRow[]> {
  let query = db('moderation_records').orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(q.limit);
  if (q.accountId !== undefined) query = query.where({ account_id: q.accountId });
  if (!q.all) query = query.whereNull('cleared_at');
  return query;
}

/** Marks an account's records cleared; returns how many. */
export async function clearModerationRecords(db: Conn, accountId: string, at: string): Promise<number> {
  return db('moderation_records').where({ account_id: accountId }).whereNull('cleared_at').update({ cleared_at: at });
}

/** Blocks an active account for moderation; false when it was not active (already blocked, or unavailable). */
export async function blockForModeration(db: Conn, accountId: string, at: string): Promise<boolean> {
  const n = await db('accounts').where({ id: accountId, state: 'active' }).update({ state: 'blocked', moderation_blocked_at: at, updated_at: at });
  return n > 0;
}

/** Lifts a block moderation set (an operator's own block stays); true when one was lifted. */
export async function liftModerationBlock(db: Conn, accountId: string, at: string): Promise<boolean> {
  const n = await db('accounts')
    .where({ id: accountId, state: 'blocked' })
    .whereNotNull('moderation_blocked_at')
    .update({ state: 'active', moderation_blocked_at: null, updated_at: at });
  return n > 0;
}
