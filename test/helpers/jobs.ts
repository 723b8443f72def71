/**
 * Queued media tasks made directly in a database, for tests of the job queue and
 * its recovery: each with a real reservation and one pending output slot.
 */
import type { Db, Tx } from '../../server/storage/db.ts';
import type { Clock } from '../../server/domain/clock.ts';
import * as ledger from '../../server/domain/ledger.ts';
import * as tasks from '../../server/storage/tasks.ts';
import * as jobs from '../../server/storage/jobs.ts';
import { createAccount, createKey } from '../../server/domain/accounts.ts';
import { openDb } from '../../server/storage/db.ts';
import { ManualClock, openTestDb } from './db.ts';
import { dbOptionsFor } from './database.ts';

export interface QueueOwner {
  accountId: string;
  keyId: string;
}

/** An account with `gems` and a generate key. */
export async function queueOwner(db: Db, clock: Clock, gems = 100): Promise<QueueOwner> {
  const a = await createAccount(db, clock, { name: 'queue' });
  await ledger.credit(db, clock, a.id, gems, 'grant');
  const { key } = await createKey(db, clock, 'gf', { accountId: a.id, name: 'k', scopes: ['generate'] });
  return { accountId: a.id, keyId: key.id };
}

/** Queues task `id` (1 Gem reserved, one output slot) with a job enqueued at the clock's now. */
export async function queueTask(db: Db, clock: Clock, owner: QueueOwner, id: string): Promise<void> {
  const r = await ledger.reserve(db, clock, { accountId: owner.accountId, keyId: owner.keyId, purpose: 'media', amount: 1 });
  await insertQueuedTask(db, clock, owner, id, r.id);
}

/** Task `id` on reservation `reservationId` (one output slot of 1 Gem) and its job, at the clock's now: in a transaction or not. */
export async function insertQueuedTask(db: Db | Tx, clock: Clock, owner: QueueOwner, id: string, reservationId: string): Promise<void> {
  const now = clock.now().toISOString();
  await tasks.insertTask(
    db,
    {
      id,
      account_id: owner.accountId,
      key_id: owner.keyId,
      kind: 'image',
      model: 'm',
      request: '{}',
      status: 'queued',
      reservation_id: reservationId,
      error_code: null,
      error_message: null,
      created_at: now,
      updated_at: now,
      finished_at: null,
    },
    [{ task_id: id, idx: 0, status: 'pending', price: 1, asset_id: null, error: null }],
  );
  await jobs.enqueue(db, id, owner.accountId, now);
}

/** Runs `fn` on a fresh database (in data dir `dir`) with a manual clock at 2026-01-01 and a queue owner (100 Gems); closes it after. */
export async function withQueue(fn: (q: { db: Db; dir: string; clock: ManualClock; owner: QueueOwner }) => Promise<void>): Promise<void> {
  const t = await openTestDb();
  try {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    await fn({ db: t.db, dir: t.dir, clock, owner: await queueOwner(t.db, clock) });
  } finally {
    await t.close();
  }
}

/**
 * The leases of the running jobs in data dir `dataDir` run out, as they would
 * after a wait once their worker was killed: their stamps are moved back past
 * any lease. Leases are judged on the database's clock, which a test cannot
 * move; a dead worker renews nothing, so the rows are what the wait would leave.
 * Returns how many leases ran out.
 */
export async function expireLeases(dataDir: string): Promise<number> {
  const db = await openDb(await dbOptionsFor(dataDir));
  try {
    return await db('jobs').where({ state: 'running' }).update({ locked_at: '2000-01-01T00:00:00.000Z' });
  } finally {
    await db.destroy();
  }
}
