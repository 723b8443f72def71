/**
 * Pages of rows newest first, continued from a position (the last row shown):
 * ordered by (created_at, id) descending, so rows made in the same millisecond
 * are neither repeated nor skipped.
 */
import type { Knex } from 'knex';
import type { Value } from './engine/query.ts';

/** Where the previous page ended. */
export interface PagePosition {
  createdAt: string;
  id: string;
}

/**
 * `query` ordered newest first, `limit` rows, after `position` when it holds the
 * previous page's last (createdAt, id) — a statement's parameters (`pageParams`).
 */
export function newestFirst<Q extends Knex.QueryBuilder>(query: Q, position: readonly Value[], limit: number): Q {
  query
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(limit);
  const [createdAt, id] = position;
  if (position.length) {
    query.andWhere((w) => {
      w.where('created_at', '<', createdAt).orWhere((same) => {
        same.where('created_at', createdAt).andWhere('id', '<', id);
      });
    });
  }
  return query;
}

/** The name of a page statement: the page size and whether it continues are its shape. */
export const pageShape = (name: string, before: PagePosition | undefined, limit: number) => `${name}:${limit}:${before ? 'after' : 'first'}`;

/** The parameters `newestFirst` takes for `before`. */
export const pageParams = (before: PagePosition | undefined): Value[] => (before ? [before.createdAt, before.id] : []);
