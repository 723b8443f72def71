/**
 * Deleting an expired output's blob races a new asset of the same bytes:
 * blobs are content-addressed, so a writer that finds the bytes
 * already stored skips writing them. Both interleavings are driven here,
 * deterministically: the new asset arriving while the sweep is about to delete,
 * and the sweep running between a new asset's put and its row. On the local
 * store (SQLite, and Postgres under `npm run test:postgres`).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import sharp from 'sharp';
import type { Db } from '../server/storage/db.ts';
import { blobPath, localBlobs, putBlobFromBuffer } from '../server/storage/blobs.ts';
import { storeReferenced } from '../server/storage/blob-pins.ts';
import * as tasks from '../server/storage/tasks.ts';
import { createOutputAsset } from '../server/domain/assets.ts';
import { expireOutputs } from '../server/domain/retention.ts';
import { queueTask, withQueue, type QueueOwner } from './helpers/jobs.ts';
import type { ManualClock } from './helpers/db.ts';

const RETENTION_MS = 60_000;

/** Stores `bytes` as task `taskId`'s output (slot 0), kept for a minute. */
async function storeOutput(q: { db: Db; dir: string; clock: ManualClock; owner: QueueOwner }, taskId: string, bytes: Buffer) {
  await queueTask(q.db, q.clock, q.owner, taskId);
  return createOutputAsset(
    q.db,
    q.clock,
    { blobs: localBlobs(q.dir), ffprobePath: '' },
    {
      accountId: q.owner.accountId,
      taskId,
      output: { bytes },
      mimeType: 'image/png',
      probe: false,
      expiresAt: new Date(q.clock.now().getTime() + RETENTION_MS),
      alongside: (trx, asset) => tasks.updateOutput(trx, taskId, 0, { status: 'succeeded', asset_id: asset.id, error: null }),
    },
  );
}

const png = () =>
  sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } })
    .png()
    .toBuffer();

describe('expired blobs and new assets of the same bytes', () => {
  it('when a new asset of the same bytes is stored while the sweep is about to delete them, then the new asset keeps its bytes', () =>
    withQueue(async (q) => {
      const bytes = await png();
      const old = await storeOutput(q, 'task_old', bytes);
      q.clock.advance(RETENTION_MS + 1);
      let fresh: ReturnType<typeof storeOutput> | undefined;
      const swept = await expireOutputs(q.db, q.clock, localBlobs(q.dir), async () => {
        // The sweep found no live asset for the hash and is about to delete: now the same bytes arrive again.
        fresh = storeOutput(q, 'task_new', bytes);
        await Promise.race([fresh, new Promise((r) => setTimeout(r, 500))]); // the writer gets every chance to finish first
      });
      assert.equal(swept, 1);
      const asset = await fresh!;
      assert.equal(asset.blob_sha256, old.blob_sha256);
      assert.ok(fs.existsSync(blobPath(q.dir, asset.blob_sha256)), "the new asset's bytes are stored");
      assert.equal((await q.db('blob_pins')).length, 0, 'no pin left behind');
    }));

  it("when the sweep runs between a new asset's put and its row, then the pinned bytes are kept", () =>
    withQueue(async (q) => {
      const bytes = await png();
      const old = await storeOutput(q, 'task_old', bytes);
      q.clock.advance(RETENTION_MS + 1);
      let deletedDuringPut = true;
      await storeReferenced(
        q.db,
        old.blob_sha256,
        q.clock.now(),
        async () => {
          await putBlobFromBuffer(localBlobs(q.dir), bytes); // already there: nothing written
          assert.equal(await expireOutputs(q.db, q.clock, localBlobs(q.dir)), 1, 'the old output expired');
          deletedDuringPut = !fs.existsSync(blobPath(q.dir, old.blob_sha256));
        },
        async () => undefined,
      );
      assert.equal(deletedDuringPut, false, 'the pin kept the bytes');
    }));

  it("when an expired output's bytes are named by nothing else, then the sweep deletes them", () =>
    withQueue(async (q) => {
      const old = await storeOutput(q, 'task_alone', await png());
      q.clock.advance(RETENTION_MS + 1);
      assert.equal(await expireOutputs(q.db, q.clock, localBlobs(q.dir)), 1);
      assert.equal(fs.existsSync(blobPath(q.dir, old.blob_sha256)), false);
      const output = (await tasks.findOutputs(q.db, 'task_alone'))[0]!;
      assert.equal(output.status, 'expired');
    }));
});
