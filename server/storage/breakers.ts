/**
 * Circuit breakers of upstream deployments shared between processes (migration
 * 018, providers/routing/shared.ts): one opened-until moment per catalog model
 * and deployment, the last writer's. Read whole (it holds a row per deployment
 * that ever opened), written with one upsert.
 */
import type { Db } from './db.ts';
import { query, statement } from './engine/query.ts';

export interface OpenBreaker {
  model: string;
  deployment: string;
  /** ms since the epoch. */
  openedUntil: number;
}

const openRows = statement.rows<{ model: string; deployment: string; opened_until: string }>('upstream-breakers-open', (c, now) =>
  c('upstream_breakers').whereNotNull('opened_until').where('opened_until', '>', now).select('model', 'deployment', 'opened_until'),
);
const upsert = statement.write('upstream-breaker-write', (c, model, deployment, until, at) =>
  c('upstream_breakers')
    .insert({ model, deployment, opened_until: until, updated_at: at })
    .onConflict(['model', 'deployment'])
    .merge(['opened_until', 'updated_at']),
);

/** The deployments whose breaker some process holds open at `now`. */
export async function openBreakers(db: Db, now: Date): Promise<OpenBreaker[]> {
  const rows = await query(db, openRows, [now.toISOString()]);
  return rows.map((r) => ({ model: r.model, deployment: r.deployment, openedUntil: Date.parse(r.opened_until) }));
}

/** Records a deployment's breaker opened until `openedUntil` (ms since the epoch), or closed (null). */
export async function writeBreaker(db: Db, model: string, deployment: string, openedUntil: number | null, now: Date): Promise<void> {
  await query(db, upsert, [model, deployment, openedUntil === null ? null : new Date(openedUntil).toISOString(), now.toISOString()]);
}
