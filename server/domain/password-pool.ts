/**
 * Console passwords (argon2id, hash-wasm) hashed and verified on worker threads.
 *
 * One hash costs ~190 ms of CPU; on the event loop, 24 concurrent sign-ins
 * moved /healthz from 2–3 ms to 550–760 ms. The pool runs at most `threads`
 * jobs at once (a global cap: argon2 also takes 19 MiB per job), queues up to
 * `queue` more, and refuses beyond that with 503 TEMPORARILY_UNAVAILABLE and
 * `Retry-After`, so a flood of sign-ins cannot pile up memory or latency.
 *
 * Workers start when first needed and are unref'd while idle: a pool never keeps
 * a process alive (the admin CLI, a test), and `close` ends them with the server.
 * A worker that dies fails its job and is replaced at the next job (threads.ts).
 */
import crypto from 'node:crypto';
import { argon2id, argon2Verify } from 'hash-wasm';
import { DomainError } from './errors.ts';
import { threadPool, type PoolSettings } from '../threads.ts';

/** Hashes and verifies passwords; the server's is a pool of threads, the admin CLI's runs inline. */
export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(password: string, hash: string): Promise<boolean>;
}

/** What the pool sends a worker. */
export type PasswordJob = { op: 'hash'; password: string } | { op: 'verify'; password: string; hash: string };

/** argon2id with OWASP's parameters (m = 19 MiB, t = 2, p = 1), on the calling thread. */
export function hashOnThisThread(password: string): Promise<string> {
  return argon2id({ password, salt: crypto.randomBytes(16), parallelism: 1, iterations: 2, memorySize: 19_456, hashLength: 32, outputType: 'encoded' });
}

/** On the calling thread: for one-shot processes (the admin CLI), where nothing else waits. */
export const inlineHasher: PasswordHasher = {
  hash: hashOnThisThread,
  verify: (password, hash) => argon2Verify({ password, hash }),
};

/** How many threads and queued jobs (config: CONSOLE_HASH_THREADS, CONSOLE_HASH_QUEUE). */
export type { PoolSettings };

export interface PasswordPool extends PasswordHasher {
  /** Ends the workers; jobs still queued or running fail. */
  close(): Promise<void>;
}

/** Seconds a refused caller is told to wait: about what the queue takes to drain. */
const RETRY_AFTER_SECONDS = 1;
const workerModule = new URL('./password-worker.ts', import.meta.url).href;

const busyRefusal = () =>
  new DomainError('TEMPORARILY_UNAVAILABLE', 'Too many sign-ins are being checked right now; try again in a moment.', {
    retryAfterSeconds: RETRY_AFTER_SECONDS,
  });

/** Runs a job on the calling thread: the worker's work, and the pool's where no worker can start. */
export function passwordJob(job: PasswordJob): Promise<string | boolean> {
  return job.op === 'hash' ? hashOnThisThread(job.password) : argon2Verify({ password: job.password, hash: job.hash });
}

export function passwordPool(settings: PoolSettings): PasswordPool {
  const pool = threadPool<PasswordJob, string | boolean>(workerModule, settings, {
    busy: busyRefusal,
    inline: passwordJob,
    failed: (reason) => new Error(`password worker: ${reason}`),
  });
  return {
    hash: async (password) => (await pool.run({ op: 'hash', password })) as string,
    verify: async (password, hash) => (await pool.run({ op: 'verify', password, hash })) as boolean,
    close: () => pool.close(),
  };
}
