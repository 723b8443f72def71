/**
 * Outputs past their retention (spec: a task's generated assets are kept for a
 * time, then the output shows `expired`): the worker's maintenance loop calls
 * this; the rules of what goes, and when the bytes may go, are here.
 */
import { inTransaction, type Db } from '../storage/db.ts';
import { markAssetDeleted } from '../storage/assets.ts';
import { deleteBlob, type Blobs } from '../storage/blobs.ts';
import { deleteUnreferenced } from '../storage/blob-pins.ts';
import type { Clock } from './clock.ts';
import * as tasks from './tasks.ts';

/**
 * Deletes outputs past their retention, up to 100 a call: the output shows
 * `expired` with no asset, and the bytes go unless something still names them,
 * decided and done under the hash's lock so a new asset of the same bytes keeps
 * them (blob-pins.ts). `beforeDelete` runs just before bytes go (tests
 * interleave there). Returns how many outputs expired.
 */
export async function expireOutputs(db: Db, clock: Clock, blobs: Blobs, beforeDelete?: (sha256: string) => Promise<void>): Promise<number> {
  const nowIso = clock.now().toISOString();
  const expired = await tasks.outputsPastRetention(db, nowIso, 100);
  for (const o of expired) {
    await inTransaction(db, async (trx) => {
      await markAssetDeleted(trx, o.asset_id!, nowIso);
      await tasks.outputExpired(trx, o.task_id, o.idx);
    });
    await deleteUnreferenced(db, o.blob_sha256, clock.now(), async () => {
      await beforeDelete?.(o.blob_sha256);
      await deleteBlob(blobs, o.blob_sha256);
    });
  }
  return expired.length;
}
