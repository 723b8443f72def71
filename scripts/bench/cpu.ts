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
/** USER_HZ: 100 on every Linux Node runs on. */
const CLOCK_TICKS = 100;
