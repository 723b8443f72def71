/** Asset rows. Plain rows in, plain rows out. */
import { newestFirst, pageParams, pageShape, type PagePosition } from './paging.ts';
import { insertRow, query, statement, type Conn } from './engine/query.ts';
import { nullableNumber } from './columns.ts';
import type { DriverRow } from './driver-row.ts';

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
type AssetDriverRow = DriverRow<AssetRow, 'size_bytes' | 'width' | 'height' | 'duration_seconds' | 'has_audio'>;

function toAsset(row: AssetDriverRow): AssetRow {
  return {
    ...row,
    size_bytes: Number(row.size_bytes),
    width: nullableNumber(row.width),
    height: nullableNumber(row.height),
    duration_seconds: nullableNumber(row.duration_seconds),
    has_audio: row.has_audio === null || row.has_audio === undefined ? null : Boolean(row.has_audio),
  };
}

export async function insertAsset(db: Conn, row: AssetRow): Promise<void> {
  await insertRow(db, 'assets', row);
}

const assetById = statement.first<AssetDriverRow>('asset-by-id', (c, id) => c('assets').where({ id }).first());

export async function findAsset(db: Conn, id: string): Promise<AssetRow | undefined> {
  const row = await query(db, assetById, [id]);
  return row ? toAsset(row) : undefined;
}

const assetsOfTask = statement.rows<AssetDriverRow>('assets-of-task', (c, task) => c('assets').where({ task_id: task }).orderBy('created_at'));

export async function listTaskAssets(db: Conn, taskId: string): Promise<AssetRow[]> {
  const rows = await query(db, assetsOfTask, [taskId]);
  return rows.map(toAsset);
}

const assetDelete = statement.write('asset-mark-deleted', (c, id, at) => c('assets').where({ id }).whereNull('deleted_at').update({ deleted_at: at }));

export async function markAssetDeleted(db: Conn, id: string, at: string): Promise<number> {
  return (await query(db, assetDelete, [id, at])).changes;
}

/** A page of the assets an account uploaded, newest first (the console's activity). */
export async function listUploads(db: Conn, accountId: string, before: PagePosition | undefined, limit: number): Promise<AssetRow[]> {
  const page = statement.rows<AssetDriverRow>(pageShape('uploads-page', before, limit), (c, account, ...position) =>
    newestFirst(c('assets').where({ account_id: account, origin: 'upload' }).select('*'), position, limit),
  );
  const rows = await query(db, page, [accountId, ...pageParams(before)]);
  return rows.map(toAsset);
}
