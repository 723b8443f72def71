/** Voice rows (catalog and uploaded). Plain rows in, plain rows out. */
import type { Knex } from 'knex';
import { isSqlite } from './db.ts';
import { newestFirst, pageParams, pageShape, type PagePosition } from './paging.ts';
import { insertRow, query, statement, type Conn, type Value } from './engine/query.ts';
import { nullableNumber } from './columns.ts';
import type { DriverRow } from './driver-row.ts';

export interface VoiceRow {
  id: string;
  account_id: string | null;
  name: string;
  language: string | null;
  visibility: 'private' | 'public';
  state: 'ready' | 'retired';
  source: 'upload' | 'catalog';
  blob_sha256: string | null;
  duration_seconds: number | null;
  transcript: string | null;
  /** JSON text: measured or catalog traits (pitchHz, rate, gender, …). */
  traits: string;
  created_at: string;
}

type VoiceDriverRow = DriverRow<VoiceRow, 'duration_seconds'>;

function toVoice(row: VoiceDriverRow): VoiceRow {
  return { ...row, duration_seconds: nullableNumber(row.duration_seconds) };
}

export async function insertVoice(db: Conn, row: VoiceRow): Promise<void> {
  await insertRow(db, 'voices', row);
}

const voiceById = statement.first<VoiceDriverRow>('voice-by-id', (c, id) => c('voices').where({ id }).first());

export async function findVoice(db: Conn, id: string): Promise<VoiceRow | undefined> {
  const row = await query(db, voiceById, [id]);
  return row ? toVoice(row) : undefined;
}

/**
 * Makes the catalog rows match `rows` (insert or update by ID); catalog voices
 * no longer listed are retired, not deleted (tasks may still name them).
 */
export async function syncCatalogVoices(db: Conn, rows: VoiceRow[]): Promise<void> {
  // Batches of rows and a list of ids the catalog's size decides: built at each call (a start-up sync).
  for (let i = 0; i < rows.length; i += 100) {
    const batch = rows.slice(i, i + 100);
    await query(
      db,
      statement.dynamic('catalog-voices-upsert', (c) =>
        c('voices').insert(batch).onConflict('id').merge(['name', 'language', 'visibility', 'state', 'traits']),
      ),
    );
  }
  const listed = rows.map((r) => r.id);
  await query(
    db,
    statement.dynamic('catalog-voices-retire', (c) => c('voices').where({ source: 'catalog' }).whereNotIn('id', listed).update({ state: 'retired' })),
  );
}

export interface VoiceQuery {
  /** `mine`: the account's private voices; `explore`: public voices. */
  scope: 'mine' | 'explore';
  accountId: string;
  /** Lower-case language tag: matches exactly or as the primary subtag (`en` matches `en-US`). */
  language?: string | undefined;
  /** Only these voice IDs (a speech model's voices); absent: no such filter. */
  ids?: readonly string[] | undefined;
  offset: number;
  limit: number;
}

/**
 * The voices `q` matches, its values as parameters: the account (mine) and the
 * language's two patterns when it has one. The scope and whether a language is
 * given are the statement's shape (`filterShape`).
 */
function filtered(c: Conn, q: VoiceQuery, [account, exact, prefix, ...ids]: Value[]): Knex.QueryBuilder {
  const voices = c('voices').where({ state: 'ready' });
  if (q.scope === 'mine') voices.where({ account_id: account!, visibility: 'private' });
  else voices.where({ visibility: 'public' });
  if (q.language) {
    voices.where((w) => {
      w.whereRaw('lower(language) = ?', [exact!]).orWhereRaw('lower(language) like ?', [prefix!]);
    });
  }
  if (q.ids) voices.whereIn('id', ids as string[]);
  return voices;
}
/** The list's length is the shape too: it changes the SQL text (an IN list, or knex's `1 = 0` when empty). */
const filterShape = (q: VoiceQuery) => `${q.scope}:${q.language ? 'language' : 'any'}${q.ids ? `:ids${q.ids.length}` : ''}`;
const filterParams = (q: VoiceQuery): Value[] => [
  ...(q.scope === 'mine' ? [q.accountId] : []),
  ...(q.language ? [q.language, `${q.language}-%`] : []),
  ...(q.ids ?? []),
];
/** filtered()'s parameters in a fixed place each: the account, the language's two patterns (null when absent), then the IDs. */
function filterArgs(q: VoiceQuery, v: Value[]): Value[] {
  let i = 0;
  const account = q.scope === 'mine' ? v[i++]! : null;
  const language = q.language ? [v[i++]!, v[i++]!] : [null, null];
  return [account, ...language, ...v.slice(i)];
}

/** One page of voices in a stable order, and how many match in all. */
export async function listVoices(db: Conn, q: VoiceQuery): Promise<{ rows: VoiceRow[]; total: number }> {
  const params = filterParams(q);
  const counted = statement.first<{ n: number | string }>(`voices-count:${filterShape(q)}`, (c, ...v) =>
    filtered(c, q, filterArgs(q, v)).count({ n: '*' }).first(),
  );
  const count = await query(db, counted, params);
  // Code-point order, as SQLite compares: a Postgres database's own collation
  // (en_US and the like) would page the same voices in another order.
  const binary = isSqlite(db) ? '' : ' COLLATE "C"';
  const order = q.scope === 'mine' ? `created_at${binary} DESC, id${binary} DESC` : `name${binary} ASC, id${binary} ASC`;
  // The offset is a parameter (bound, as knex binds it); the page size is the shape.
  const page = statement.rows<VoiceDriverRow>(`voices-page:${filterShape(q)}:${q.limit}`, (c, offset, ...v) =>
    filtered(c, q, filterArgs(q, v))
      .orderByRaw(order)
      .offset(c.raw('?', [offset]))
      .limit(q.limit),
  );
  const rows = await query(db, page, [q.offset, ...params]);
  return { rows: rows.map(toVoice), total: Number(count?.n ?? 0) };
}

/** A page of an account's own voices, newest first (the console's activity). */
export async function listAccountVoices(db: Conn, accountId: string, before: PagePosition | undefined, limit: number): Promise<VoiceRow[]> {
  const page = statement.rows<VoiceDriverRow>(pageShape('account-voices-page', before, limit), (c, account, ...position) =>
    newestFirst(c('voices').where({ account_id: account }).select('*'), position, limit),
  );
  const rows = await query(db, page, [accountId, ...pageParams(before)]);
  return rows.map(toVoice);
}
