/** URL-signing keys in the database (migration 010): shared by every instance. */
import crypto from 'node:crypto';
import { inTransaction, type Db } from './db.ts';
import { query, statement } from './engine/query.ts';

export interface SigningKeyRow {
  id: number;
  secret: string;
  created_at: string;
  retired_at: string | null;
}

/** The key that signs (the newest unretired one) and the keys retired since `since`, newest first. */
export async function signingKeys(db: Db, since: string): Promise<{ current: SigningKeyRow | undefined; previous: SigningKeyRow[] }> {
  const rows = await query(db, keysSince, [since]);
  return { current: rows.find((r) => r.retired_at === null), previous: rows.filter((r) => r.retired_at !== null) };
}

const keysSince = statement.rows<SigningKeyRow>('signing-keys-since', (c, since) =>
  c('signing_keys')
    .where((q) => {
      q.whereNull('retired_at').orWhere('retired_at', '>', since);
    })
    .orderBy('id', 'desc'),
);
const liveKeys = statement.rows<SigningKeyRow>('signing-keys-live', (c) => c('signing_keys').whereNull('retired_at').orderBy('id'));
const currentKey = statement.first<SigningKeyRow>('signing-key-current', (c) => c('signing_keys').whereNull('retired_at').orderBy('id').first());
const keyCreate = statement.write<{ id: number }>('signing-key-create', (c, secret, now) =>
  c('signing_keys').insert({ secret, created_at: now, retired_at: null }).returning('id'),
);
const keysRetire = statement.write('signing-keys-retire', (c, now) => c('signing_keys').whereNull('retired_at').update({ retired_at: now }));

/**
 * The current key, created once when there is none: `seed` (the secret an
 * installation kept in DATA_DIR before keys moved to the database, so its links
 * stay valid) or a fresh random one. Two instances starting at once agree: the
 * lowest id wins and any extra one is retired at once.
 */
export async function ensureSigningKey(db: Db, nowIso: string, seed: string | undefined): Promise<void> {
  await inTransaction(db, async (trx) => {
    const current = await query(trx, currentKey);
    if (current) return;
    await query(trx, keyCreate, [seed ?? crypto.randomBytes(32).toString('hex'), nowIso]);
  });
  const extra = (await query(db, liveKeys)).slice(1).map((r) => r.id);
  const retire = statement.write(`signing-keys-retire-extra:${extra.length}`, (c, now, ...ids) =>
    c('signing_keys').whereIn('id', ids).whereNull('retired_at').update({ retired_at: now }),
  );
  if (extra.length) await query(db, retire, [nowIso, ...extra]);
}

/** Rotates: a new random key signs from now on; the old one is retired (it verifies until its links expire). Returns the new key's id. */
export async function rotateSigningKey(db: Db, nowIso: string): Promise<number> {
  return inTransaction(db, async (trx) => {
    await query(trx, keysRetire, [nowIso]);
    const { rows } = await query(trx, keyCreate, [crypto.randomBytes(32).toString('hex'), nowIso]);
    return Number(rows[0]!.id);
  });
}
