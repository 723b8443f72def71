/**
 * Pages of rows newest first, continued from a position (the last row shown):
 * ordered by (created_at, id) descending, so rows made in the same millisecond
 * are neither repeated nor skipped.
 */
import type { Knex } from 'knex';

/** Where the previous page ended. */
export interface PagePosition {
  createdAt: string;
  id: string;
}

export function newestFirst<Q extends Knex.QueryBuilder>(query: Q, before: PagePosition | undefined, limit: number): Q {
  query.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
  if (before) query.andWhere((w) => w.where('created_at', '<', before.createdAt).orWhere((same) => same.where('created_at', before.createdAt).andWhere('id', '<', before.id)));
  return query;
}
