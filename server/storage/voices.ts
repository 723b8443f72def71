/** Voice rows (catalog and uploaded). Plain rows in, plain rows out. */
import type { Knex } from 'knex';
import { isSqlite, type Db } from './db.ts';
import { newestFirst, type PagePosition } from './paging.ts';

type Conn = Db | Knex.Transaction;

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

function toVoice(row: Record<string, unknown>): VoiceRow {
  const d = row.duration_seconds;
  return { ...(row as unknown as VoiceRow), duration_seconds: d === null || d === undefined ? null : Number(d) };
}

export async function insertVoice(db: Conn, row: VoiceRow): Promise<void> {
  await db('voices').insert(row);
}

export async function findVoice(db: Conn, id: string): Promise<VoiceRow | undefined> {
  const row = await db('voices').where({ id }).first();
  return row ? toVoice(row) : undefined;
}

/**
 * Makes the catalog rows match `rows` (insert or update by ID); catalog voices
 * no longer listed are retired, not deleted (tasks may still name them).
 */
export async function syncCatalogVoices(db: Conn, rows: VoiceRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 100) {
    await db('voices')
      .insert(rows.slice(i, i + 100))
      .onConflict('id')
      .merge(['name', 'language', 'visibility', 'state', 'traits']);
  }
  await db('voices')
    .where({ source: 'catalog' })
    .whereNotIn('id', rows.map((r) => r.id))
    .update({ state: 'retired' });
}

export interface VoiceQuery {
  /** `mine`: the account's private voices; `explore`: public voices. */
  scope: 'mine' | 'explore';
  accountId: string;
  /** Lower-case language tag: matches exactly or as the primary subtag (`en` matches `en-US`). */
  language?: string | undefined;
  offset: number;
  limit: number;
}

function filtered(db: Conn, q: VoiceQuery): Knex.QueryBuilder {
  const query = db('voices').where({ state: 'ready' });
  if (q.scope === 'mine') query.where({ account_id: q.accountId, visibility: 'private' });
  else query.where({ visibility: 'public' });
  if (q.language) {
    const lang = q.language;
    query.where((w) => w.whereRaw('lower(language) = ?', [lang]).orWhereRaw('lower(language) like ?', [`${lang}-%`]));
  }
  return query;
}

/** One page of voices in a stable order, and how many match in all. */
export async function listVoices(db: Conn, q: VoiceQuery): Promise<{ rows: VoiceRow[]; total: number }> {
  const count = await filtered(db, q).count({ n: '*' }).first();
  // Code-point order, as SQLite compares: a Postgres database's own collation
  // (en_US and the like) would page the same voices in another order.
  const binary = isSqlite(db) ? '' : ' COLLATE "C"';
  const order = q.scope === 'mine' ? `created_at${binary} DESC, id${binary} DESC` : `name${binary} ASC, id${binary} ASC`;
  const rows = await filtered(db, q).orderByRaw(order).offset(q.offset).limit(q.limit);
  return { rows: rows.map(toVoice), total: Number(count?.n ?? 0) };
}

/** A page of an account's own voices, newest first (the console's activity). */
export async function listAccountVoices(db: Conn, accountId: string, before: PagePosition | undefined, limit: number): Promise<VoiceRow[]> {
  const rows = await newestFirst(db('voices').where({ account_id: accountId }).select('*'), before, limit);
  return rows.map(toVoice);
}
