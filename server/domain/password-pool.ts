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
 * A worker that dies fails its job (503) and is replaced at the next job.
 */
import crypto from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import { argon2id, argon2Verify } from 'hash-wasm';
import { DomainError } from './errors.ts';
import { typescriptWorker } from '../threads.ts';

/** Hashes and verifies passwords; the server's is a pool of threads, the admin CLI's runs inline. */
export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(password: string, hash: string): Promise<boolean>;
}

/** What the pool sends a worker, and what it answers. */
export type PasswordJob = { op: 'hash'; password: string } | { op: 'verify'; password: string; hash: string };
export type PasswordAnswer = { ok: true; value: string | boolean } | { ok: false; error: string };

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
export interface PoolSettings {
  threads: number;
  queue: number;
}

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

interface Job {
  message: PasswordJob;
  resolve(value: string | boolean): void;
  reject(error: unknown): void;
}

export function passwordPool(settings: PoolSettings): PasswordPool {
  const idle: Worker[] = [];
  const running = new Map<Worker, Job | undefined>();
  const waiting: Job[] = [];
  let closed = false;

  function assign(worker: Worker, job: Job): void {
    running.set(worker, job);
    worker.ref(); // a job in flight keeps the process alive until it answers
    worker.postMessage(job.message);
  }

  /** The worker's job is done: the next one waiting, or rest (unref'd). */
  function next(worker: Worker): void {
    const job = waiting.shift();
    if (job) return assign(worker, job);
    running.set(worker, undefined);
    worker.unref();
    idle.push(worker);
  }

  function spawn(): Worker | undefined {
    const worker = typescriptWorker(workerModule);
    if (!worker) return undefined;
    running.set(worker, undefined);
    worker.on('message', (answer: PasswordAnswer) => {
      const job = running.get(worker);
      if (job) {
        if (answer.ok) job.resolve(answer.value);
        else job.reject(new Error(`password worker: ${answer.error}`));
      }
      next(worker);
    });
    let dead = false;
    const gone = (error?: unknown) => {
      if (dead) return; // 'error' is followed by 'exit'
      dead = true;
      const job = running.get(worker);
      running.delete(worker);
      const at = idle.indexOf(worker);
      if (at >= 0) idle.splice(at, 1);
      job?.reject(error ?? new Error('password worker exited'));
      // A queued job waits for a live worker: start one in the dead one's place.
      if (!closed && waiting.length > 0) {
        const fresh = spawn();
        if (fresh) next(fresh);
      }
    };
    worker.once('error', gone);
    worker.once('exit', () => gone());
    return worker;
  }

  function run(message: PasswordJob): Promise<string | boolean> {
    return new Promise((resolve, reject) => {
      if (closed) return reject(busyRefusal());
      const job = { message, resolve, reject };
      const worker = idle.pop() ?? (running.size < settings.threads ? spawn() : undefined);
      if (worker) return assign(worker, job);
      if (running.size === 0) {
        // No worker can start here (no tsx): the work runs on this thread.
        (message.op === 'hash' ? inlineHasher.hash(message.password) : inlineHasher.verify(message.password, message.hash)).then(resolve, reject);
        return;
      }
      if (waiting.length >= settings.queue) return reject(busyRefusal());
      waiting.push(job);
    });
  }

  return {
    hash: async (password) => (await run({ op: 'hash', password })) as string,
    verify: async (password, hash) => (await run({ op: 'verify', password, hash })) as boolean,
    async close() {
      closed = true;
      for (const job of waiting.splice(0)) job.reject(busyRefusal());
      await Promise.all([...running.keys()].map((worker) => worker.terminate()));
    },
  };
}
