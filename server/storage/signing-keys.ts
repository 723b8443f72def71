/** URL-signing keys in the database (migration 010): shared by every instance. */
import crypto from 'node:crypto';
import { inTransaction, type Db } from './db.ts';

export interface SigningKeyRow {
  id: number;
  secret: string;
  created_at: string;
  retired_at: string | null;
}

/** The key that signs (the newest unretired one) and the keys retired since `since`, newest first. */
export async function signingKeys(db: Db, since: string): Promise<{ current: SigningKeyRow | undefined; previous: SigningKeyRow[] }> {
  const rows = (await db('signing_keys').where((q) => q.whereNull('retired_at').orWhere('retired_at', '>', since)).orderBy('id', 'desc')) as SigningKeyRow[];
  return { current: rows.find((r) => r.retired_at === null), previous: rows.filter((r) => r.retired_at !== null) };
}

/**
 * The current key, created once when there is none: `seed` (the secret an
 * installation kept in DATA_DIR before keys moved to the database, so its links
 * stay valid) or a fresh random one. Two instances starting at once agree: the
 * lowest id wins and any extra one is retired at once.
 */
export async function ensureSigningKey(db: Db, nowIso: string, seed: string | undefined): Promise<void> {
  await inTransaction(db, async (trx) => {
    const current = await trx('signing_keys').whereNull('retired_at').orderBy('id').first();
    if (current) return;
    await trx('signing_keys').insert({ secret: seed ?? crypto.randomBytes(32).toString('hex'), created_at: nowIso, retired_at: null });
  });
  const live = (await db('signing_keys').whereNull('retired_at').orderBy('id')) as SigningKeyRow[];
  if (live.length > 1) await db('signing_keys').whereIn('id', live.slice(1).map((r) => r.id)).whereNull('retired_at').update({ retired_at: nowIso });
}

/** Rotates: a new random key signs from now on; the old one is retired (it verifies until its links expire). Returns the new key's id. */
export async function rotateSigningKey(db: Db, nowIso: string): Promise<number> {
  return inTransaction(db, async (trx) => {
    await trx('signing_keys').whereNull('retired_at').update({ retired_at: nowIso });
    const [row] = (await trx('signing_keys').insert({ secret: crypto.randomBytes(32).toString('hex'), created_at: nowIso, retired_at: null }).returning('id')) as Array<{ id: number } | number>;
    return typeof row === 'number' ? row : row!.id;
  });
}
