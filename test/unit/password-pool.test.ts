/**
 * The console's password pool (server/domain/password-pool.ts): argon2id on
 * worker threads, a cap on running and queued jobs (503 with Retry-After past
 * it), and threads that never keep a process alive once idle.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { inlineHasher, passwordPool } from '../../server/domain/password-pool.ts';
import { answerOf } from '../../server/http/error-map.ts';

const POOL_MODULE = path.resolve(import.meta.dirname, '../../server/domain/password-pool.ts');

describe('password pool', () => {
  it('when a password is hashed on the pool, then it verifies on the pool and inline, and another password does not', async () => {
    const pool = passwordPool({ threads: 2, queue: 4 });
    try {
      const hash = await pool.hash('correct horse battery staple');
      assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      assert.equal(await pool.verify('correct horse battery staple', hash), true);
      assert.equal(await pool.verify('another password', hash), false);
      assert.equal(await inlineHasher.verify('correct horse battery staple', hash), true);
    } finally {
      await pool.close();
    }
  });

  it('when more jobs arrive than the threads run and the queue holds, then the rest are refused with 503 TEMPORARILY_UNAVAILABLE and a Retry-After', async () => {
    const pool = passwordPool({ threads: 1, queue: 1 });
    try {
      const jobs = await Promise.allSettled(Array.from({ length: 4 }, (_, i) => pool.hash(`password ${i}`)));
      assert.deepEqual(
        jobs.map((j) => j.status),
        ['fulfilled', 'fulfilled', 'rejected', 'rejected'],
      );
      const refusal = answerOf((jobs[2] as PromiseRejectedResult).reason);
      assert.ok(refusal);
      assert.equal(refusal.status, 503);
      assert.equal(refusal.code, 'TEMPORARILY_UNAVAILABLE');
      assert.ok(refusal.retryAfterSeconds! > 0);
    } finally {
      await pool.close();
    }
  });

  it('when a process hashed on the pool and never closed it, then the process still ends by itself, after the answer', () => {
    const code = `import { passwordPool } from ${JSON.stringify(POOL_MODULE)};
const pool = passwordPool({ threads: 1, queue: 0 });
console.log(await pool.verify('x', await pool.hash('x')));`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(run.signal, null, 'killed at the timeout: the idle pool kept the process alive');
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.trim(), 'true');
  });
});
