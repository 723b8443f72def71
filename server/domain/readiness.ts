/**
 * What /readyz asks of the storage (routes/health.ts): the database answers a
 * statement, and the blob store (local directory or S3-compatible bucket) is
 * reachable and writable. Each throws when it is not.
 *
 * The local disk is this instance's own: DATA_DIR/tmp (every upload and output
 * passes through it, also with BLOB_STORE=s3) must be a writable directory
 * with free space, or the instance is not ready at once. An object store is
 * shared by every instance: one failed HeadBucket (a blip) would take all of
 * them out of the balancer together, so it is marked failed only after
 * SHARED_FAILURES_BEFORE_NOT_READY consecutive failed checks (docs/operations.md, "Outages").
 */
import type { Db } from '../storage/db.ts';
import { blobStoreName, checkBlobStore, checkTempSpace, type Blobs } from '../storage/blobs.ts';

export type { Blobs, Db };
export { databaseAnswers } from '../storage/maintenance.ts';

/** Free space DATA_DIR/tmp needs for /readyz: room for the largest upload (30 MiB) twice over, and then some. */
export const MIN_TEMP_FREE_BYTES = 64 * 1024 * 1024;

/** Consecutive failed checks of a shared object store before /readyz reports it failed. */
export const SHARED_FAILURES_BEFORE_NOT_READY = 3;

/** An object-store check that has not answered in this long counts as failed (inside /readyz's own 2 s). */
const SHARED_CHECK_TIMEOUT_MS = 1500;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error('the object store did not answer in time')), ms))),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The readiness check of an installation's blob store, built once per app (it
 * counts the object store's consecutive failures between checks): the check
 * throws when the store cannot take writes. `tolerated` hears of an object
 * store failure that did not (yet) make the check fail, with the count so far.
 */
export function blobStoreWritable(blobs: Blobs): (tolerated?: (error: unknown, consecutive: number) => void) => Promise<void> {
  let consecutive = 0;
  return async (tolerated) => {
    if (blobStoreName(blobs) !== 'object store') {
      await checkBlobStore(blobs);
      await checkTempSpace(blobs.dataDir, MIN_TEMP_FREE_BYTES);
      return;
    }
    await checkTempSpace(blobs.dataDir, MIN_TEMP_FREE_BYTES);
    try {
      await withTimeout(checkBlobStore(blobs), SHARED_CHECK_TIMEOUT_MS);
      consecutive = 0;
    } catch (error) {
      consecutive++;
      if (consecutive >= SHARED_FAILURES_BEFORE_NOT_READY) throw error;
      tolerated?.(error, consecutive);
    }
  };
}
