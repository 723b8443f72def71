/**
 * Worker-thread entry for console passwords: one argon2id hash or verification
 * costs ~190 ms of CPU, which on the event loop delayed every other request
 * (password-pool.ts). One job at a time; the pool sends the next when this one answers.
 */
import { parentPort } from 'node:worker_threads';
import { argon2Verify } from 'hash-wasm';
import { hashOnThisThread, type PasswordJob, type PasswordAnswer } from './password-pool.ts';

parentPort?.on('message', (job: PasswordJob) => {
  const work = job.op === 'hash' ? hashOnThisThread(job.password) : argon2Verify({ password: job.password, hash: job.hash });
  work.then(
    (value) => parentPort!.postMessage({ ok: true, value } satisfies PasswordAnswer),
    (error: unknown) => parentPort!.postMessage({ ok: false, error: String(error) } satisfies PasswordAnswer),
  );
});
