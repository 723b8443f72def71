/**
 * What /readyz asks of the storage (routes/health.ts): the database answers a
 * statement, and the blob store (local directory or S3-compatible bucket) is
 * reachable and writable. Each throws when it is not.
 */
import type { Db } from '../storage/db.ts';
import { checkBlobStore } from '../storage/blobs.ts';

export type { Db };
export { databaseAnswers } from '../storage/maintenance.ts';

export async function blobStoreWritable(dataDir: string): Promise<void> {
  await checkBlobStore(dataDir);
}
