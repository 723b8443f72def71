/** Asset rows. Plain rows in, plain rows out. */
import type { Knex } from 'knex';
import { newestFirst, type PagePosition } from './paging.ts';
import type { Db } from './db.ts';

type Conn = Db | Knex.Transaction;

export type AssetKind = 'image' | 'video' | 'audio';
export type AssetState = 'processing' | 'ready' | 'failed';

export interface AssetRow {
  id: string;
  account_id: string;
  kind: AssetKind;
  mime_type: string;
  state: AssetState;
  size_bytes: number;
  blob_sha256: string;
  filename: string | null;
  width: number | null;
  height: number | null;
  duration_seconds: number | null;
  video_codec: string | null;
  audio_codec: string | null;
  has_audio: boolean | null;
  origin: 'upload' | 'output';
  task_id: string | null;
  expires_at: string | null;
  deleted_at: string | null;
  created_at: string;
}

/** SQLite returns booleans as 0/1 and big integers as numbers; normalise both drivers. */
function toAsset(row: Record<string, unknown>): AssetRow {
  const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    ...(row as unknown as AssetRow),
    size_bytes: Number(row.size_bytes),
    width: nullableNumber(row.width),
    height: nullableNumber(row.height),
    duration_seconds: nullableNumber(row.duration_seconds),
    has_audio: row.has_audio === null || row.has_audio === undefined ? null : Boolean(row.has_audio),
  };
}

export async function insertAsset(db: Conn, row: AssetRow): Promise<void> {
  await db('assets').insert(row);
}

export async function findAsset(db: Conn, id: string): Promise<AssetRow | undefined> {
  const row = await db('assets').where({ id }).first();
  return row ? toAsset(row) : undefined;
}

export async function listTaskAssets(db: Conn, taskId: string): Promise<AssetRow[]> {
  const rows = await db('assets').where({ task_id: taskId }).orderBy('created_at');
  return rows.map(toAsset);
}

export async function markAssetDeleted(db: Conn, id: string, at: string): Promise<number> {
  return db('assets').where({ id }).whereNull('deleted_at').update({ deleted_at: at });
}

/** A page of the assets an account uploaded, newest first (the console's activity). */
export async function listUploads(db: Conn, accountId: string, before: PagePosition | undefined, limit: number): Promise<AssetRow[]> {
  const rows = await newestFirst(db('assets').where({ account_id: accountId, origin: 'upload' }).select('*'), before, limit);
  return rows.map(toAsset);
}
