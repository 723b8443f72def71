/** A process's CPU time, read from Linux's /proc (the benchmarks' steadier figure beside req/s). */
import fs from 'node:fs';

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat; undefined elsewhere. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/**
 * Each thread's name (MainThread, libuv-worker, V8Worker …) and CPU time so far
 * in clock ticks (10 ms), by thread id, from /proc/<pid>/task; empty where there is none.
 */
export function threadCpuTicks(pid: number): Map<string, { name: string; ticks: number }> {
  const threads = new Map<string, { name: string; ticks: number }>();
  let tids: string[] = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return threads;
  }
  for (const tid of tids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      threads.set(tid, { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      /* the thread ended */
    }
  }
  return threads;
}

/** USER_HZ: 100 on every Linux Node runs on. */
const CLOCK_TICKS = 100;
