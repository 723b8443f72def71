/**
 * Waiting for a media task (spec, "Events"): poll with backoff, 2, 4, 8, then
 * 15 s with jitter, within a bounded wait; stop at a terminal status. When the
 * wait ends first, TaskWaitTimeout keeps the task ID so the caller reads it
 * later: nothing is ever resubmitted. Browser-safe.
 */
import type { components } from './generated/api.ts';
import { retryReason, abortableSleep, delayAt, jittered } from './retry.ts';

export type Task = components['schemas']['Task'];
export type TaskStatus = Task['status'];

/** `succeeded`, `partial`, `failed`, `cancelled`. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['succeeded', 'partial', 'failed', 'cancelled'];
export const isTerminal = (status: TaskStatus): boolean => TERMINAL_STATUSES.includes(status);

/** The spec's example schedule. */
export const DEFAULT_POLL_SCHEDULE_MS = [2000, 4000, 8000, 15000];

export interface TaskProgress {
  task: Task;
  elapsedMs: number;
  /** Reads made so far. */
  polls: number;
}

export interface WaitOptions {
  /** Stops the wait (TaskWaitAborted); the task itself goes on. */
  signal?: AbortSignal;
  /** The bounded application wait (default 15 minutes). */
  maxWaitMs?: number;
  /** Called after every read, with the snapshot. */
  onProgress?: (progress: TaskProgress) => void;
  /** Delays between reads in ms; the last repeats (default 2, 4, 8, then 15 s). */
  scheduleMs?: number[];
  /** ± fraction of each delay (default 0.2). */
  jitter?: number;
  /** Injectable for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  now?: () => number;
}

/** The wait ended before the task did; `taskId` is kept. Read it later; never resubmit. */
export class TaskWaitTimeout extends Error {
  constructor(
    readonly taskId: string,
    readonly lastTask: Task | undefined,
    readonly elapsedMs: number,
  ) {
    super(`Task ${taskId} is still ${lastTask?.status ?? 'unread'} after ${Math.round(elapsedMs / 1000)} s; read it later with its ID (do not resubmit).`);
    this.name = 'TaskWaitTimeout';
  }
}

/** The caller aborted the wait; `taskId` is kept and the task goes on. */
export class TaskWaitAborted extends Error {
  constructor(
    readonly taskId: string,
    readonly lastTask: Task | undefined,
  ) {
    super(`Stopped waiting for task ${taskId}; it goes on. Read it later with its ID (do not resubmit).`);
    this.name = 'TaskWaitAborted';
  }
}

/**
 * Polls `getTask(id)` until the task is terminal and returns the terminal
 * snapshot. Transient read failures (5xx, network) are polled through; other
 * errors (404, 401, …) are thrown.
 */
export async function waitForTask(getTask: (id: string, signal?: AbortSignal) => Promise<Task>, id: string, options: WaitOptions = {}): Promise<Task> {
  const { signal, onProgress } = options;
  const maxWaitMs = options.maxWaitMs ?? 15 * 60_000;
  const schedule = options.scheduleMs ?? DEFAULT_POLL_SCHEDULE_MS;
  const jitter = options.jitter ?? 0.2;
  const sleep = options.sleep ?? abortableSleep;
  const now = options.now ?? Date.now;
  const started = now();
  let last: Task | undefined;
  let polls = 0;
  for (let round = 0; ; round++) {
    if (signal?.aborted) throw new TaskWaitAborted(id, last);
    try {
      last = await getTask(id, signal);
      polls++;
      onProgress?.({ task: last, elapsedMs: now() - started, polls });
      if (isTerminal(last.status)) return last;
    } catch (error) {
      if (signal?.aborted) throw new TaskWaitAborted(id, last);
      if (!retryReason(error) || retryReason(error) === 'uncertain') throw error;
    }
    const elapsed = now() - started;
    if (elapsed >= maxWaitMs) throw new TaskWaitTimeout(id, last, elapsed);
    const delay = Math.min(jittered(delayAt(schedule, round), jitter), maxWaitMs - elapsed);
    try {
      await sleep(delay, signal);
    } catch {
      throw new TaskWaitAborted(id, last);
    }
  }
}
