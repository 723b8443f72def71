/**
 * Fair share of the media queue between accounts, on whichever database the
 * suite runs: accounts take turns at the claim, one account's running jobs are
 * capped per lane (its own cap, else the configured one), a capped account
 * never leaves a worker idle while another has due work, and a re-queued job
 * keeps its place within its account. The worker is driven claim by claim.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as jobs from '../server/storage/jobs.ts';
import * as accounts from '../server/domain/accounts.ts';
import { queueOwner, queueTask, withQueue } from './helpers/jobs.ts';

const NO_CAPS = { local: 0, remote: 0 };

describe('fair share of the media queue', () => {
  it('when account A queued many jobs and then account B one, then B is claimed within the next two claims', () =>
    withQueue(async ({ db, clock, owner: a }) => {
      for (let i = 0; i < 40; i++) await queueTask(db, clock, a, `task_a${i}`);
      const claim = async () => (await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))?.task_id;
      assert.equal(await claim(), 'task_a0');
      const b = await queueOwner(db, clock);
      clock.advance(10);
      await queueTask(db, clock, b, 'task_b0');
      const next = [await claim(), await claim()];
      assert.ok(next.includes('task_b0'), `B's job is among the next two claims: ${next.join(', ')}`);
      // Then A's backlog goes on in its own order.
      assert.deepEqual(
        next.filter((t) => t !== 'task_b0'),
        ['task_a1'],
      );
      assert.equal(await claim(), 'task_a2');
    }));

  it('when two accounts both have backlogs, then claims alternate between them', () =>
    withQueue(async ({ db, clock, owner: a }) => {
      const b = await queueOwner(db, clock);
      for (let i = 0; i < 5; i++) await queueTask(db, clock, a, `task_a${i}`);
      for (let i = 0; i < 5; i++) await queueTask(db, clock, b, `task_b${i}`);
      const order: string[] = [];
      for (let i = 0; i < 10; i++) order.push((await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))!.task_id.slice(5, 6));
      assert.deepEqual(order, ['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
      assert.equal(await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS), undefined);
    }));

  it('when an account reaches its running cap, then it waits while another account is served, and goes on once one of its jobs ends', () =>
    withQueue(async ({ db, clock, owner: a }) => {
      const caps = { local: 2, remote: 0 };
      const claim = () => jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', caps);
      for (let i = 0; i < 5; i++) await queueTask(db, clock, a, `task_a${i}`);
      const first = (await claim())!;
      assert.equal((await claim())?.task_id, 'task_a1');
      assert.equal(await claim(), undefined, 'A is at its cap of 2');
      const b = await queueOwner(db, clock);
      await queueTask(db, clock, b, 'task_b0');
      assert.equal((await claim())?.task_id, 'task_b0', 'the worker does not idle: B is served');
      assert.equal(await claim(), undefined);
      assert.ok(await jobs.finish(db, first.id, 'w', clock.now().toISOString()));
      assert.equal((await claim())?.task_id, 'task_a2');
    }));

  it("when the operator sets an account's own cap, then it replaces the configured one for that account only", () =>
    withQueue(async ({ db, clock, owner: a }) => {
      const b = await queueOwner(db, clock);
      await accounts.updateAccount(db, clock, a.accountId, { localConcurrency: 1 });
      for (let i = 0; i < 3; i++) await queueTask(db, clock, a, `task_a${i}`);
      for (let i = 0; i < 3; i++) await queueTask(db, clock, b, `task_b${i}`);
      const claimed: string[] = [];
      for (;;) {
        const job = await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', { local: 2, remote: 0 });
        if (!job) break;
        claimed.push(job.task_id);
      }
      assert.deepEqual(claimed, ['task_a0', 'task_b0', 'task_b1']);
    }));

  it("when an account's own cap is 0, then it has no cap while others keep the configured one", () =>
    withQueue(async ({ db, clock, owner: a }) => {
      await accounts.updateAccount(db, clock, a.accountId, { localConcurrency: 0 });
      for (let i = 0; i < 3; i++) await queueTask(db, clock, a, `task_a${i}`);
      let n = 0;
      while (await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', { local: 1, remote: 1 })) n++;
      assert.equal(n, 3);
    }));

  it('when a claimed job is handed back, then it is its account next job again, ahead of that account newer ones', () =>
    withQueue(async ({ db, clock, owner: a }) => {
      for (let i = 0; i < 3; i++) {
        await queueTask(db, clock, a, `task_a${i}`);
        clock.advance(10);
      }
      const job = (await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))!;
      assert.equal(job.task_id, 'task_a0');
      assert.equal(job.account_id, a.accountId);
      // Claim the other two, then hand the first back.
      assert.equal((await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))?.task_id, 'task_a1');
      assert.equal((await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))?.task_id, 'task_a2');
      assert.equal(await jobs.queuedOf(db, a.accountId), 0, 'every job claimed: none counted as queued');
      assert.equal((await db('queue_turns').where({ account_id: a.accountId })).length, 0, 'and its turn row went');
      assert.ok(await jobs.handBack(db, job.id, 'w', clock.now().toISOString()));
      assert.equal(await jobs.queuedOf(db, a.accountId), 1, 'handed back: queued again, with its turn row');
      assert.equal((await jobs.claimNext(db, 'w', clock.now().toISOString(), 'local', NO_CAPS))?.task_id, 'task_a0', 'the handed-back job is claimable again');
    }));
});
