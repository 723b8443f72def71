/**
 * Progress while a task is polled, on stderr (stdout stays for results):
 * a spinner with the status and elapsed time on a terminal, plain lines otherwise.
 */
import type { Task } from '../tasks.ts';

export interface Progress {
  update(task: Task, elapsedMs: number): void;
  stop(): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const seconds = (ms: number) => `${Math.floor(ms / 1000)}s`;

export function createProgress(out: NodeJS.WritableStream & { isTTY?: boolean }, quiet = false): Progress {
  if (quiet) return { update() {}, stop() {} };
  if (!out.isTTY) {
    // A line when the status changes, and at least every 15 s while it does not.
    let last = '';
    let printedAt = -Infinity;
    return {
      update(task, elapsedMs) {
        if (task.status === last && elapsedMs - printedAt < 15_000) return;
        last = task.status;
        printedAt = elapsedMs;
        out.write(`task ${task.id}: ${task.status} (${seconds(elapsedMs)})\n`);
      },
      stop() {},
    };
  }
  let frame = 0;
  let line = '';
  const started = Date.now();
  let base = 0; // elapsed at the last update, so the clock keeps running between polls
  let at = started;
  const draw = () => {
    const elapsed = base + (Date.now() - at);
    out.write(`\r\x1b[K${FRAMES[frame++ % FRAMES.length]} ${line} ${seconds(elapsed)}`);
  };
  const timer = setInterval(draw, 100);
  timer.unref();
  return {
    update(task, elapsedMs) {
      line = `task ${task.id} ${task.status}`;
      base = elapsedMs;
      at = Date.now();
      draw();
    },
    stop() {
      clearInterval(timer);
      out.write('\r\x1b[K');
    },
  };
}
