/**
 * Job leases across machines whose clocks disagree: leases
 * and backoffs are stamped and judged by the database's clock, so a worker
 * whose own clock runs ten minutes off neither steals a live lease nor keeps an
 * expired one. On SQLite, and on Postgres under `npm run test:postgres`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import sharp from 'sharp';
import type { Clock } from '../server/domain/clock.ts';
import type { Db } from '../server/storage/db.ts';
import * as jobs from '../server/storage/jobs.ts';
import { createLogger } from '../server/logger.ts';
import { leaseTime, recoverExpiredLeases, startWorker } from '../server/worker/worker.ts';
import type { MediaProvider } from '../server/providers/media-types.ts';
import { queueTask, withQueue } from './helpers/jobs.ts';
import { until } from './helpers/poll.ts';

const TEN_MINUTES = 10 * 60_000;
/** A process clock running `ms` off (a machine whose NTP failed). */
const skewed = (ms: number): Clock => ({ now: () => new Date(Date.now() + ms) });
const behind = skewed(-TEN_MINUTES);
const ahead = skewed(TEN_MINUTES);
const logger = createLogger('silent');
const providers = {} as Parameters<typeof recoverExpiredLeases>[0]['providers'];

const stateOf = async (db: Db, taskId: string) => (await jobs.findJobByTask(db, taskId))!;

describe('job leases on the database clock', () => {
  it('when a worker whose clock runs ten minutes ahead runs beside one whose clock runs ten minutes behind, then it never takes the live job the other holds', () =>
    withQueue(async ({ db, dir, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_live');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let calls = 0;
      const provider: MediaProvider = {
        name: 'gated',
        resume: 'rerun',
        async generate(_job, tools) {
          calls++;
          await gate;
          const file = await tools.tempFile('.png');
          await fsp.writeFile(
            file,
            await sharp({ create: { width: 8, height: 8, channels: 3, background: '#808080' } })
              .png()
              .toBuffer(),
          );
          return { file, mimeType: 'image/png' };
        },
      };
      // A lease of 1 s, heart-beaten every 333 ms: a loaded machine (the suite runs two files at once) can delay a
      // beat by a few hundred ms, and a lease that then passed would be taken rightly — not what this test is about.
      const common = {
        db,
        logger,
        providers: { image: provider },
        dataDir: dir,
        ffmpegPath: '',
        ffprobePath: '',
        outputRetentionSeconds: 60,
        concurrency: 1,
        leaseMs: 1000,
        pollMs: 20,
        retryBackoffMs: 0,
      };
      const slow = startWorker({ ...common, clock: behind });
      let fast: ReturnType<typeof startWorker> | undefined;
      try {
        await until('the first worker claims the job', async () => ((await stateOf(db, 'task_live')).locked_by === slow.id ? true : undefined), 5000, 25);
        // The second worker's maintenance looks for expired leases every 500 ms; the first heart-beats every 333 ms.
        fast = startWorker({ ...common, clock: ahead });
        await new Promise((r) => setTimeout(r, 3000)); // three leases' time, on a clock the test cannot move
        const job = await stateOf(db, 'task_live');
        assert.equal(job.state, 'running');
        assert.equal(job.locked_by, slow.id, 'the live lease was not taken');
        assert.equal(job.attempts, 1);
        release();
        await until('the first worker finishes the job', async () => ((await stateOf(db, 'task_live')).state === 'done' ? true : undefined), 5000, 25);
      } finally {
        release();
        await Promise.all([slow.stop(), fast?.stop()]);
      }
      assert.equal(calls, 1, 'generated once');
      const task = (await db('tasks').where({ id: 'task_live' }).first()) as { status: string };
      assert.equal(task.status, 'succeeded');
    }));

  it('when a worker whose clock runs ten minutes ahead dies holding a job, then a worker whose clock runs behind recovers it as soon as the lease has passed', () =>
    withQueue(async ({ db, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_orphan');
      const claimed = await jobs.claimNext(db, 'w-ahead', leaseTime(ahead));
      assert.equal(claimed?.task_id, 'task_orphan');
      const recover = () => recoverExpiredLeases({ db, clock: behind, logger, providers, leaseMs: 300, retryBackoffMs: 0 });
      const started = Date.now();
      await until(
        'the expired lease is recovered',
        async () => {
          await recover();
          return (await stateOf(db, 'task_orphan')).state === 'queued' ? true : undefined;
        },
        5000,
        25,
      );
      assert.ok(Date.now() - started >= 250, 'not before the lease passed');
    }));

  it('when a worker whose clock runs ahead re-queues a job with a backoff, then a worker whose clock runs behind claims it after the backoff, not ten minutes later', () =>
    withQueue(async ({ db, clock, owner }) => {
      await queueTask(db, clock, owner, 'task_backoff');
      assert.ok(await jobs.claimNext(db, 'w-dead', leaseTime(behind)));
      await until(
        'the expired lease is recovered',
        async () => {
          await recoverExpiredLeases({ db, clock: ahead, logger, providers, leaseMs: 200, retryBackoffMs: 300 });
          return (await stateOf(db, 'task_backoff')).state === 'queued' ? true : undefined;
        },
        5000,
        25,
      );
      assert.equal(await jobs.claimNext(db, 'w-behind', leaseTime(behind)), undefined, 'not during its backoff');
      const job = await until('the job is claimed after its backoff', () => jobs.claimNext(db, 'w-behind', leaseTime(behind)), 5000, 25);
      assert.equal(job.task_id, 'task_backoff');
      assert.equal(job.attempts, 2);
    }));

  it('when the lease time is read, then a process clock gives the database clock and a shared (test) clock gives its own time', () => {
    assert.equal(leaseTime(ahead), jobs.DATABASE_CLOCK);
    assert.equal(leaseTime({ shared: true, now: () => new Date('2026-01-01T00:00:00Z') }), '2026-01-01T00:00:00.000Z');
  });
});
