/**
 * Moderation records (a refused request leaves one, nothing else) and the
 * account block repeated refusals set. Plain rows in, plain rows out.
 */
import { insertRow, query, statement, type Conn } from './engine/query.ts';

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
  await insertRow(db, 'moderation_records', row);
}

const recentRecords = statement.first<{ n: number | string }>('moderation-records-recent-count', (c, account, since) =>
  c('moderation_records').where({ account_id: account }).whereNull('cleared_at').where('created_at', '>=', since).count({ n: '*' }).first(),
);

/** Records of an account not cleared, created at or after `since`. */
export async function countRecentRecords(db: Conn, accountId: string, since: string): Promise<number> {
  const row = await query(db, recentRecords, [accountId, since]);
  return Number(row?.n ?? 0);
}

/** Newest first; only records not cleared unless `all`. */
export async function listModerationRecords(db: Conn, q: { accountId?: string | undefined; all: boolean; limit: number }): Promise<ModerationRecordRow[]> {
  const ofAccount = q.accountId !== undefined;
  const records = statement.rows<ModerationRecordRow>(
    `moderation-records:${q.limit}:${ofAccount ? 'account' : 'any'}:${q.all ? 'all' : 'open'}`,
    (c, account) => {
      let found = c('moderation_records')
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(q.limit);
      if (ofAccount) found = found.where({ account_id: account! });
      if (!q.all) found = found.whereNull('cleared_at');
      return found;
    },
  );
  return query(db, records, ofAccount ? [q.accountId!] : []);
}

const recordsClear = statement.write('moderation-records-clear', (c, account, at) =>
  c('moderation_records').where({ account_id: account }).whereNull('cleared_at').update({ cleared_at: at }),
);

/** Marks an account's records cleared; returns how many. */
export async function clearModerationRecords(db: Conn, accountId: string, at: string): Promise<number> {
  return (await query(db, recordsClear, [accountId, at])).changes;
}

const moderationBlock = statement.write('account-moderation-block', (c, id, at) =>
  c('accounts').where({ id, state: 'active' }).update({ state: 'blocked', moderation_blocked_at: at, updated_at: at }),
);

/** Blocks an active account for moderation; false when it was not active (already blocked, or unavailable). */
export async function blockForModeration(db: Conn, accountId: string, at: string): Promise<boolean> {
  return (await query(db, moderationBlock, [accountId, at])).changes > 0;
}

const moderationLift = statement.write('account-moderation-lift', (c, id, at) =>
  c('accounts').where({ id, state: 'blocked' }).whereNotNull('moderation_blocked_at').update({ state: 'active', moderation_blocked_at: null, updated_at: at }),
);

/** Lifts a block moderation set (an operator's own block stays); true when one was lifted. */
export async function liftModerationBlock(db: Conn, accountId: string, at: string): Promise<boolean> {
  return (await query(db, moderationLift, [accountId, at])).changes > 0;
}
