/**
 * Worker threads that run one of the server's modules. From the sources (tsx)
 * a worker does not inherit the loader, so its first act is to register tsx's
 * API and then import the TypeScript module. The compiled server
 * (scripts/build.ts) built each worker module as an entry of its own in
 * dist/app, named after the module, and starts that. Undefined when neither
 * can be found (the caller then does the work on its own thread).
 *
 * `threadPool` runs jobs of one kind on a few such workers: console passwords
 * (domain/password-pool.ts) and the moderation of long texts
 * (providers/moderation/off-thread.ts).
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parentPort, Worker, type WorkerOptions } from 'node:worker_threads';
import { QUIET_MS, type Collect } from './memory.ts';

/** What a worker is started with. */
export type ThreadOptions = Pick<WorkerOptions, 'workerData'>;

/** True in the compiled server (esbuild `define`); undeclared when running from the sources. */
declare const __GEMFORGE_COMPILED__: boolean | undefined;

function tsxApi(): string | undefined {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
}

/** The worker module at `moduleUrl` (a file: URL of its TypeScript source) on a thread, or undefined; `options` as node:worker_threads takes them. */
export function typescriptWorker(moduleUrl: string, options: ThreadOptions = {}): Worker | undefined {
  if (typeof __GEMFORGE_COMPILED__ === 'boolean') {
    // In the bundle import.meta.dirname still names server/ (scripts/build.ts keeps source paths).
    const name = path.basename(fileURLToPath(moduleUrl), '.ts');
    return new Worker(pathToFileURL(path.join(import.meta.dirname, '../dist/app', `${name}.mjs`)), options);
  }
  const api = tsxApi();
  if (!api) return undefined;
  const bootstrap = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(moduleUrl)}); })`;
  return new Worker(bootstrap, { ...options, eval: true });
}

/** How many threads a pool runs and how many jobs wait for one before it refuses. */
export interface PoolSettings {
  threads: number;
  queue: number;
}

/** What a pool's worker module answers for each job. */
export type ThreadAnswer<Value> = { ok: true; value: Value } | { ok: false; error: string };

/** Jobs of one kind run on a few worker threads of one module. */
export interface ThreadPool<Job, Value> {
  /** The job's answer from a worker; rejects with `busy()` past the queue, or when the worker fails or dies. */
  run(job: Job): Promise<Value>;
  /** Ends the workers; jobs still queued or running fail. */
  close(): Promise<void>;
  /** How many worker threads are alive (none until the first job). */
  threads(): number;
}

interface Pending<Job, Value> {
  job: Job;
  resolve(value: Value): void;
  reject(error: unknown): void;
}

/**
 * A pool of worker threads running `moduleUrl` (a module that answers each message with a
 * ThreadAnswer, one job at a time), at most `threads` jobs at once (a global cap on CPU and
 * memory), up to `queue` more waiting, and `busy()` thrown beyond that, so a flood cannot
 * pile up memory or latency.
 *
 * Workers start when first needed (an idle server holds none) and are unref'd while idle: a
 * pool never keeps a process alive (the admin CLI, a test), and `close` ends them with the
 * server; with `idleMs`, a worker that has had no job for that long ends too. A worker that dies
 * fails its job and is replaced at the next job. Where no worker can start (no tsx), `inline`
 * does the job on the calling thread.
 */
export function threadPool<Job, Value>(
  moduleUrl: string,
  settings: PoolSettings,
  options: { busy: () => Error; inline: (job: Job) => Promise<Value>; failed?: (reason: string) => Error; thread?: ThreadOptions; idleMs?: number },
): ThreadPool<Job, Value> {
  const idle: Worker[] = [];
  /** Idle workers' retirement timers (with `idleMs`). */
  const resting = new Map<Worker, NodeJS.Timeout>();
  const running = new Map<Worker, Pending<Job, Value> | undefined>();
  const waiting: Array<Pending<Job, Value>> = [];
  const failed = options.failed ?? ((reason: string) => new Error(`worker thread: ${reason}`));
  let closed = false;

  function assign(worker: Worker, pending: Pending<Job, Value>): void {
    clearTimeout(resting.get(worker));
    resting.delete(worker);
    running.set(worker, pending);
    worker.ref(); // a job in flight keeps the process alive until it answers
    worker.postMessage(pending.job);
  }

  /** The worker's job is done: the next one waiting, or rest (unref'd). */
  function next(worker: Worker): void {
    const pending = waiting.shift();
    if (pending) return assign(worker, pending);
    running.set(worker, undefined);
    worker.unref();
    idle.push(worker);
    if (options.idleMs !== undefined) resting.set(worker, setTimeout(() => retire(worker), options.idleMs).unref());
  }

  /** A worker idle for `idleMs` ends: an idle server gives its memory back, and the next job starts a thread again. */
  function retire(worker: Worker): void {
    resting.delete(worker);
    const at = idle.indexOf(worker);
    if (at < 0) return;
    idle.splice(at, 1);
    running.delete(worker);
    void worker.terminate();
  }

  function spawn(): Worker | undefined {
    const worker = typescriptWorker(moduleUrl, options.thread);
    if (!worker) return undefined;
    running.set(worker, undefined);
    worker.on('message', (answer: ThreadAnswer<Value>) => {
      const pending = running.get(worker);
      if (pending) {
        if (answer.ok) pending.resolve(answer.value);
        else pending.reject(failed(answer.error));
      }
      next(worker);
    });
    let dead = false;
    const gone = (error?: unknown) => {
      if (dead) return; // 'error' is followed by 'exit'
      dead = true;
      clearTimeout(resting.get(worker));
      resting.delete(worker);
      const pending = running.get(worker);
      running.delete(worker);
      const at = idle.indexOf(worker);
      if (at >= 0) idle.splice(at, 1);
      pending?.reject(failed(error === undefined ? 'the thread exited' : String(error)));
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

  return {
    run(job) {
      return new Promise((resolve, reject) => {
        if (closed) return reject(options.busy());
        const pending = { job, resolve, reject };
        const worker = idle.pop() ?? (running.size < settings.threads ? spawn() : undefined);
        if (worker) return assign(worker, pending);
        // No worker can start here (no tsx): the work runs on this thread.
        if (running.size === 0) return void options.inline(job).then(resolve, reject);
        if (waiting.length >= settings.queue) return reject(options.busy());
        waiting.push(pending);
      });
    },
    async close() {
      closed = true;
      for (const timer of resting.values()) clearTimeout(timer);
      for (const pending of waiting.splice(0)) pending.reject(options.busy());
      await Promise.all([...running.keys()].map((worker) => worker.terminate()));
    },
    threads: () => running.size,
  };
}

/**
 * V8's memory-reducing collection on this thread (Node's `gc`, which a worker has when the server
 * runs with --expose-gc, node-flags.ts); nothing without it. A thread that built a large structure
 * (the moderation policy: ~100 MB resident while built, ~12 MB live after) hands the rest back.
 */
export function collectGarbage(): void {
  const collect = (globalThis as { gc?: Collect }).gc;
  if (typeof collect === 'function') collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/**
 * In a pool's worker module: answers each job the pool sends with `handle`'s value, or its error as
 * text. With `collectWhenQuiet`, once no job has come for QUIET_MS after one, the thread collects
 * its garbage (as the server's main thread does, memory.ts), so an idle thread stays small.
 */
export function answerJobs<Job, Value>(handle: (job: Job) => Promise<Value>, options: { collectWhenQuiet?: boolean } = {}): void {
  let quiet: NodeJS.Timeout | undefined;
  parentPort?.on('message', (job: Job) => {
    clearTimeout(quiet);
    handle(job)
      .then(
        (value) => parentPort!.postMessage({ ok: true, value } satisfies ThreadAnswer<Value>),
        (error: unknown) => parentPort!.postMessage({ ok: false, error: String(error) } satisfies ThreadAnswer<Value>),
      )
      .finally(() => {
        if (options.collectWhenQuiet) quiet = setTimeout(collectGarbage, QUIET_MS).unref();
      });
  });
}
