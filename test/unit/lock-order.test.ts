/**
 * The order in which a media submission's transaction takes an account's rows
 * on Postgres (balances.ts "Locking"): the balance row before the queue turn row
 * (migration 017), whether the hold is decided at the commit or the long way.
 * Two submissions of one account that took them in opposite orders deadlocked,
 * and each deadlock cost Postgres's deadlock_timeout and a retry. The account's
 * rate buckets, taken with the commit on the first way (rate-buckets.ts
 * `guardTokens`), come between the two.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inTransaction, type Db } from '../../server/storage/db.ts';
import * as ledger from '../../server/domain/ledger.ts';
import type { Tx } from '../../server/storage/db.ts';
import { insertQueuedTask, queueOwner, queueTask, type QueueOwner } from '../helpers/jobs.ts';
import { ManualClock, openTestDb } from '../helpers/db.ts';
import { until } from '../helpers/poll.ts';
import { guardTokens, takeTokens, type Bucket } from '../../server/storage/rate-buckets.ts';

const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));

/** The key's and the account's media buckets, never short of a token here. */
const bucketsOf = (owner: QueueOwner): Bucket[] => [
  { id: `key:${owner.keyId}:media`, rate: 1, burst: 100 },
  { id: `account:${owner.accountId}:media`, rate: 1, burst: 100 },
];

/** What a media submission's story does after its claim: the hold, on the first way its tokens, the task and its job (domain/tasks.ts `submitMedia`). */
async function submitIn(trx: Tx, owner: QueueOwner, id: string, atCommit: boolean, beforeTask: () => Promise<void> = async () => {}): Promise<void> {
  const r = await ledger.reserveTx(trx, clock, { accountId: owner.accountId, keyId: owner.keyId, purpose: 'media', amount: 1, atCommit });
  if (atCommit) assert.ok(await guardTokens(trx, bucketsOf(owner), clock.now().getTime()));
  await beforeTask();
  await insertQueuedTask(trx, clock, owner, id, r.id);
}

/** Sessions of this database waiting for a lock another holds. */
async function lockWaits(db: Db): Promise<number> {
  const r = await db.raw("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
  return Number(r.rows[0].n);
}

describe('lock order of a submission on Postgres', () => {
  it(
    'when a submission holds the account row the long way while another sends its at-commit batch, then both commit at their first attempt (no deadlock)',
    { skip: process.env.TEST_DATABASE_URL ? false : 'needs Postgres (npm run test:postgres): SQLite has one writer and no row locks' },
    async () => {
      const t = await openTestDb();
      try {
        const owner = await queueOwner(t.db, clock);
        // Its balance rows, the key's included, and its queue turn row exist: each transaction below locks rows, never inserts them.
        await queueTask(t.db, clock, owner, 'task-0');
        const attempts = { long: 0, atCommit: 0 };
        let atCommit: Promise<void> | undefined;
        await inTransaction(t.db, (trx) => {
          attempts.long++;
          return submitIn(trx, owner, `task-long-${attempts.long}`, false, async () => {
            if (atCommit) return; // a retry: the other one was already sent
            // The account's balance row is locked (lockFigures): the other submission's batch goes now, and waits at one of its rows.
            atCommit = inTransaction(t.db, (other) => {
              attempts.atCommit++;
              return submitIn(other, owner, `task-commit-${attempts.atCommit}`, true);
            });
            await until('the at-commit batch to wait for a row lock', async () => (await lockWaits(t.db)) > 0);
            // Waiting for the balance row, the batch holds none of the account's buckets: another request's take is not queued behind it.
            let taken = false;
            const take = takeTokens(t.db, bucketsOf(owner), clock.now().getTime()).then(() => void (taken = true));
            await until('the take to end or to wait too', async () => taken || (await lockWaits(t.db)) > 1);
            assert.equal(taken, true, "a take waited for a bucket row held by a batch that waits for the account's balance row");
            await take;
          });
        });
        await atCommit;
        // A deadlock victim is rolled back and retried whole (db.ts inTransaction): a second attempt is the deadlock's trace.
        assert.deepEqual(attempts, { long: 1, atCommit: 1 });
        assert.equal(Number((await t.db('jobs').count({ n: '*' }))[0].n), 3);
        assert.deepEqual(await t.db('queue_turns').where({ account_id: owner.accountId }).select('queued'), [{ queued: 3 }]);
        // Each bucket gave the take's token and the at-commit submission's.
        const tokens = await t.db('rate_buckets').orderBy('id').select('tokens');
        assert.deepEqual(
          tokens.map((r) => Number(r.tokens)),
          [98, 98],
        );
      } finally {
        await t.close();
      }
    },
  );
});
