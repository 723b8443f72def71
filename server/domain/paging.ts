/**
 * Cursors of the console's paged lists (newest first): the position of the last
 * row shown, opaque to the caller (base64url of "created_at|id").
 */
import { DomainError } from './errors.ts';
import type { PagePosition } from '../storage/paging.ts';

/** The rows of a page (`limit` of the `limit + 1` read) and the cursor of the next page, null after the last. */
export function pageOf<R extends { id: string; created_at: string }>(rows: R[], limit: number): { rows: R[]; next: string | null } {
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  return { rows: shown, next: rows.length > limit && last ? Buffer.from(`${last.created_at}|${last.id}`).toString('base64url') : null };
}

export function decodeCursor(cursor: string | undefined): PagePosition | undefined {
  if (cursor === undefined) return undefined;
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (!createdAt || !id || Number.isNaN(Date.parse(createdAt)))
    throw new DomainError('INVALID_REQUEST', 'The cursor is not one this server gave; start from the first page.');
  return { createdAt, id };
}
