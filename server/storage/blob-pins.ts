/**
 * Deleting an expired blob without racing a new reference to the same bytes
 * (several writers and a sweep share one store). Blobs are content-addressed, so a new asset of the same
 * bytes can arrive while the sweep deletes an expired one: its writer finds the
 * blob present and skips writing it, then the sweep removes it, and the new row
 * points at nothing. On both databases:
 *
 * - a writer pins the hash (a committed row) before it puts the bytes, and
 *   drops the pin in the transaction that inserts its referencing row;
 * - the sweep deletes bytes only inside a transaction that holds the hash's
 *   lock and found no live asset, no voice and no fresh pin naming it.
 *
 * Pinning takes the same lock, so the two are ordered: a pin committed first
 * stops the deletion; a deletion committed first happened before the writer's
 * put, which then finds the blob missing and writes it. The lock is a Postgres
 * advisory lock on the hash, or SQLite's one write lock (each side writes
 * first). A pin a crashed writer left stops nothing after STALE_PIN_MS.
 */
import crypto from 'node:crypto';
import { inTransaction, isSqlite, type Db, type Tx } from './db.ts';
import { query, statement } from './engine/query.ts';

/** Pins older than this were left by a process that died (no put takes this long). */
export const STALE_PIN_MS = 6 * 3600 * 1000;

/** Advisory-lock class of blob hashes on Postgres ("blob"), apart from the migration lock's key space. */
const BLOB_LOCK_CLASS = 0x626c6f62;

const hashLock = statement.rows('blob-hash-lock', (c, sha256) => c.raw('select pg_advisory_xact_lock(?::int, hashtext(?))', [BLOB_LOCK_CLASS, sha256]));
const stalePinsDrop = statement.write('blob-stale-pins-drop', (c, sha256, before) =>
  c('blob_pins').where({ sha256 }).where('created_at', '<', before).delete(),
);
const pinInsert = statement.write('blob-pin-insert', (c, token, sha256, at) => c('blob_pins').insert({ token, sha256, created_at: at }));
const pinDrop = statement.write('blob-pin-drop', (c, token) => c('blob_pins').where({ token }).delete());
const liveAsset = statement.first('blob-live-asset', (c, sha256) => c('assets').where({ blob_sha256: sha256 }).whereNull('deleted_at').first('id'));
const voiceOf = statement.first('blob-voice', (c, sha256) => c('voices').where({ blob_sha256: sha256 }).first('id'));
const pinOf = statement.first('blob-pin', (c, sha256) => c('blob_pins').where({ sha256 }).first('token'));

/** Holds the hash until the transaction ends; drops pins crashed writers left on it (on SQLite that write is what takes the lock). */
async function lockHash(trx: Tx, sha256: string, now: Date): Promise<void> {
  if (!isSqlite(trx)) await query(trx, hashLock, [sha256]);
  await query(trx, stalePinsDrop, [sha256, new Date(now.getTime() - STALE_PIN_MS).toISOString()]);
}

/**
 * Puts a blob (`put`, which may skip bytes already stored) and inserts the row
 * referencing it (`insert`, in a transaction), with the hash pinned in between
 * so the expiry sweep keeps the bytes. Returns what `insert` returned.
 */
export async function storeReferenced<T>(db: Db, sha256: string, now: Date, put: () => Promise<unknown>, insert: (trx: Tx) => Promise<T>): Promise<T> {
  const token = crypto.randomUUID();
  await inTransaction(db, async (trx) => {
    await lockHash(trx, sha256, now);
    await query(trx, pinInsert, [token, sha256, now.toISOString()]);
  });
  try {
    await put();
    return await inTransaction(db, async (trx) => {
      const out = await insert(trx);
      await query(trx, pinDrop, [token]);
      return out;
    });
  } catch (error) {
    await query(db, pinDrop, [token]).catch(() => undefined);
    throw error;
  }
}

/**
 * Runs `remove` (deleting the blob's bytes) inside a transaction holding the
 * hash, unless a live asset, a voice or a writer's pin still names it; true
 * when it ran.
 */
export async function deleteUnreferenced(db: Db, sha256: string, now: Date, remove: () => Promise<void>): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    await lockHash(trx, sha256, now);
    // One after another: the transaction's one connection runs one query at a time.
    if (await query(trx, liveAsset, [sha256])) return false;
    if (await query(trx, voiceOf, [sha256])) return false;
    if (await query(trx, pinOf, [sha256])) return false;
    await remove();
    return true;
  });
}
