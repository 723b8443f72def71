/** Account and API-key rows. Plain rows in, plain rows out. */
import type { Knex } from 'knex';
import { isSqlite } from './db.ts';
import { columnsOf, insertRow, query, rowOf, rowParams, statement, type Conn } from './engine/query.ts';
import { nullableNumber } from './columns.ts';
import type { DriverRow } from './driver-row.ts';

export type AccountState = 'active' | 'blocked' | 'unavailable';

/** Policy settings on the account row (migration 007), so authentication's one read carries them. */
export interface AccountPolicyColumns {
  content_preference: string; // standard | strict
  network_allow: string | null; // JSON array of CIDR ranges
  network_deny: string | null;
  blocked_regions: string | null; // JSON array of region codes
  unknown_region: string; // allow | block
  moderation_blocked_at: string | null;
}

export interface AccountRow extends AccountPolicyColumns {
  id: string;
  name: string;
  state: AccountState;
  llm_allowance: number;
  paid_consent: boolean;
  /** The operator's caps for this account (migration 017); null: the configured default. */
  local_concurrency?: number | null;
  remote_concurrency?: number | null;
  queued_tasks?: number | null;
  created_at: string;
  updated_at: string;
}

export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  secret_hash: string;
  secret_hint: string;
  scope_read: boolean;
  scope_generate: boolean;
  monthly_cap: number | null;
  expires_at: string | null;
  revoked_at: string | null;
  created_at: string;
  /** When it last authenticated a request, to within a minute (migration 014); null: not since. */
  last_used_at?: string | null;
}

/** SQLite returns booleans as 0/1 and big integers as numbers; normalise both drivers. */
type AccountDriverRow = DriverRow<AccountRow, 'llm_allowance' | 'paid_consent'>;
type KeyDriverRow = DriverRow<ApiKeyRow, 'scope_read' | 'scope_generate' | 'monthly_cap'>;

function toAccount(row: AccountDriverRow): AccountRow {
  return {
    ...row,
    llm_allowance: Number(row.llm_allowance),
    paid_consent: Boolean(row.paid_consent),
  };
}

function toKey(row: KeyDriverRow): ApiKeyRow {
  return {
    ...row,
    scope_read: Boolean(row.scope_read),
    scope_generate: Boolean(row.scope_generate),
    monthly_cap: nullableNumber(row.monthly_cap),
  };
}

export async function insertAccount(db: Conn, row: AccountRow): Promise<void> {
  await insertRow(db, 'accounts', row);
}

const accountById = statement.first<AccountDriverRow>('account-by-id', (c, id) => c('accounts').where({ id }).first());

export async function findAccount(db: Conn, id: string): Promise<AccountRow | undefined> {
  const row = await query(db, accountById, [id]);
  return row ? toAccount(row) : undefined;
}

export async function updateAccount(
  db: Conn,
  id: string,
  patch: Partial<
    Pick<AccountRow, 'state' | 'llm_allowance' | 'paid_consent' | 'name' | 'local_concurrency' | 'remote_concurrency' | 'queued_tasks'> & AccountPolicyColumns
  > & { updated_at: string },
): Promise<void> {
  const columns = columnsOf(patch);
  await query(
    db,
    statement.write(`account-update:${columns}`, (c, i, ...v) => c('accounts').where({ id: i }).update(rowOf(columns, v))),
    [id, ...rowParams(columns, patch)],
  );
}

const accountIds = statement.rows<{ id: string }>('account-ids', (c) => c('accounts').select('id').orderBy('created_at'));

export async function listAccountIds(db: Conn): Promise<string[]> {
  const rows = await query(db, accountIds);
  return rows.map((r) => r.id);
}

export async function insertKey(db: Conn, row: ApiKeyRow): Promise<void> {
  await insertRow(db, 'api_keys', row);
}

/** Every api_keys column, as `k.<column> as key__<column>` (beside the account's own `a.*`). */
const KEY_COLUMNS: ReadonlyArray<keyof ApiKeyRow> = [
  'id',
  'account_id',
  'name',
  'secret_hash',
  'secret_hint',
  'scope_read',
  'scope_generate',
  'monthly_cap',
  'expires_at',
  'revoked_at',
  'created_at',
];
const KEY_SELECT = KEY_COLUMNS.map((c) => `k.${c} as key__${c}`);

const keyWithAccount = statement.first('key-with-account', (c, secretHash) =>
  c('api_keys as k')
    .join('accounts as a', 'a.id', 'k.account_id')
    .where('k.secret_hash', secretHash)
    .select('a.*', ...KEY_SELECT)
    .limit(1),
);

/**
 * A key and its account in one statement (authentication's one round trip).
 * The account comes back whole (`a.*`), so columns added to it later need no
 * change here; the key's columns are prefixed to keep the two apart.
 */
export async function findKeyWithAccount(db: Conn, secretHash: string): Promise<{ key: ApiKeyRow; account: AccountRow } | undefined> {
  const row = await query(db, keyWithAccount, [secretHash]);
  if (!row) return undefined;
  const key: Record<string, unknown> = {};
  const account: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    if (column.startsWith('key__')) key[column.slice(5)] = value;
    else account[column] = value;
  }
  return { key: toKey(key as KeyDriverRow), account: toAccount(account as AccountDriverRow) }; // split by prefix: the columns are the tables' own
}

const keyById = statement.first<KeyDriverRow>('key-by-id', (c, id) => c('api_keys').where({ id }).first());

export async function findKey(db: Conn, id: string): Promise<ApiKeyRow | undefined> {
  const row = await query(db, keyById, [id]);
  return row ? toKey(row) : undefined;
}

const keysOf = statement.rows<KeyDriverRow>('keys-of-account', (c, account) => c('api_keys').where({ account_id: account }).orderBy('created_at'));

export async function listKeys(db: Conn, accountId: string): Promise<ApiKeyRow[]> {
  const rows = await query(db, keysOf, [accountId]);
  return rows.map(toKey);
}

const activeKeys = statement.first<{ n: number | string }>('active-keys-count', (c, account) =>
  c('api_keys').where({ account_id: account }).whereNull('revoked_at').count({ n: '*' }).first(),
);

/** Keys not revoked (expired keys still count, as in the account settings page). */
export async function countActiveKeys(db: Conn, accountId: string): Promise<number> {
  const row = await query(db, activeKeys, [accountId]);
  return Number(row?.n ?? 0);
}

const keySettings = statement.write('key-settings', (c, id, name, cap, expires) =>
  c('api_keys').where({ id }).whereNull('revoked_at').update({ name, monthly_cap: cap, expires_at: expires }),
);

/** Sets a key's name, cap and expiry unless it is revoked; false when it is (or is gone). */
export async function updateKeySettings(db: Conn, id: string, s: Pick<ApiKeyRow, 'name' | 'monthly_cap' | 'expires_at'>): Promise<boolean> {
  return (await query(db, keySettings, [id, s.name, s.monthly_cap, s.expires_at])).changes === 1;
}

const keyRevoke = statement.write('key-revoke', (c, id, at) => c('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at }));

export async function revokeKey(db: Conn, id: string, at: string): Promise<number> {
  return (await query(db, keyRevoke, [id, at])).changes;
}

/**
 * Takes the account row's write lock for the rest of the transaction on Postgres
 * (SQLite's single writer already serializes). Whatever checks a limit of the
 * account and then inserts (reserve, credit, key creation) holds it, so no two
 * such checks interleave and pass the limit together.
 */
export async function lockAccountRow(trx: Knex.Transaction, accountId: string): Promise<void> {
  if (!isSqlite(trx)) await query(trx, accountLock, [accountId]);
}

const accountLock = statement.rows('account-lock', (c, id) => c('accounts').where({ id }).select('id').forUpdate());

const keyUse = statement.write('key-use', (c, id, at) =>
  c('api_keys')
    .where({ id })
    .where((q) => {
      q.whereNull('last_used_at').orWhere('last_used_at', '<', at);
    })
    .update({ last_used_at: at }),
);

/** Stamps a key's last use, never moving it back (processes' writes may arrive out of order). */
export async function markKeyUsed(db: Conn, id: string, at: string): Promise<void> {
  await query(db, keyUse, [id, at]);
}
