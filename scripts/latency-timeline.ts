/**
 * Where a percentile's tail comes from: gemforge started as
 * bench-http starts it (NODE_ENV=production, worker off), new image
 * submissions sent by `--connections` clients for `--seconds` after a
 * warm-up, each answer's latency kept with the time it was sent, and the
 * server's CPU sampled per thread every 50 ms from /proc. Prints the
 * percentiles, then every 100 ms window whose median answer took over
 * `--slow` times the run's median, with what each group of the server's
 * threads used in it (main: the event loop; libuv: SQLite's writer, reads and
 * checkpoints; v8: garbage collection helpers), and how often the server used
 * less than half a core in such windows, which points to waiting (I/O, a lock)
 * rather than work. `--env KEY=VALUE` (repeatable) passes settings to the
 * server, to compare. Linux only (/proc); run it on another core than the
 * server's, as bench-http does:
 *
 *   taskset -c 0 npx node --import tsx scripts/latency-timeline.ts [--seconds 15] [--env SQLITE_SYNCHRONOUS=FULL]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startGemforge, type Started } from './bench/processes.ts';
import { IMAGE, seedBenchKey } from './bench/fixture.ts';
import { quantile } from './bench/quantile.ts';
import { threadCpuTicks } from './bench/cpu.ts';
import { runNodeClient } from './bench/clients.ts';
import type { LoadJob } from './bench/types.ts';

const { values } = parseArgs({
  options: {
    connections: { type: 'string', default: '32' },
    seconds: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
    slow: { type: 'string', default: '1.25' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const CONNECTIONS = Number(values.connections);
const WINDOW_MS = 100;
const SAMPLE_MS = 50;

/** One answer: when its request left (ms from the measurement's start) and how long it took. */
type Answer = [sentAt: number, latency: number];

/** Submits IMAGE with a new identity each from CONNECTIONS clients for `seconds` (Node's client, as bench-http's `node` jobs); calls `onAnswer` with each. */
async function submissions(server: Started, secret: string, seconds: number, onAnswer?: (sentAt: number, latency: number) => void): Promise<void> {
  const job: LoadJob = {
    kind: 'node',
    url: `${server.base}/api/generate/image`,
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify(IMAGE),
    freshIdempotencyKey: true,
    connections: CONNECTIONS,
    warmupSeconds: 0,
    durationSeconds: seconds,
  };
  const result = await runNodeClient(job, seconds, onAnswer);
  const other = Object.keys(result.statuses).filter((status) => status !== '202');
  if (result.errors > 0 || other.length > 0) throw new Error(`submissions failed: ${result.errors} errors, statuses ${JSON.stringify(result.statuses)}`);
}

/** The thread group a /proc thread name belongs to. */
const group = (name: string) => (name === 'MainThread' ? 'main' : name.startsWith('libuv') ? 'libuv' : name.startsWith('V8') ? 'v8' : 'other');
const GROUPS = ['main', 'libuv', 'v8', 'other'] as const;

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-timeline-'));
  const extra = Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  try {
    const secret = await seedBenchKey(dataDir);
    const server = await startGemforge(
      { DATA_DIR: dataDir, NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'info', ...extra },
      path.join(dataDir, 'server.log'),
    );
    const answers: Answer[] = [];
    const samples: Array<{ at: number; threads: ReturnType<typeof threadCpuTicks> }> = [];
    try {
      await submissions(server, secret, Number(values.warmup));
      const start = performance.now();
      const sampler = setInterval(() => samples.push({ at: performance.now() - start, threads: threadCpuTicks(server.child.pid!) }), SAMPLE_MS);
      await submissions(server, secret, Number(values.seconds), (sentAt, latency) => answers.push([sentAt - start, latency]));
      clearInterval(sampler);
    } finally {
      await server.stop();
    }
    const sorted = answers.map(([, l]) => l).sort((a, b) => a - b);
    const q = (p: number) => quantile(sorted, p).toFixed(1);
    const sum = (threads: ReturnType<typeof threadCpuTicks>) => [...threads.values()].reduce((total, t) => total + t.ticks, 0);
    const [first, last] = [samples[0]!, samples.at(-1)!];
    const busy = ((sum(last.threads) - sum(first.threads)) * 10) / (last.at - first.at);
    console.log(
      `${answers.length} submissions, ${(answers.length / Number(values.seconds)).toFixed(0)}/s; ms: p50 ${q(0.5)}, p90 ${q(0.9)}, p99 ${q(0.99)}, p99.9 ${q(0.999)}, max ${q(1)}; the server used ${busy.toFixed(2)} cores on average`,
    );

    // CPU ms per thread group in each window, from the difference between samples.
    const cpu = new Map<number, Record<string, number>>();
    for (let i = 1; i < samples.length; i++) {
      const w = Math.floor(samples[i]!.at / WINDOW_MS);
      const into = cpu.get(w) ?? Object.fromEntries(GROUPS.map((g) => [g, 0]));
      for (const [tid, { name, ticks }] of samples[i]!.threads) into[group(name)]! += (ticks - (samples[i - 1]!.threads.get(tid)?.ticks ?? ticks)) * 10;
      cpu.set(w, into);
    }
    const windows = new Map<number, number[]>();
    for (const [sentAt, latency] of answers) {
      const w = Math.floor(sentAt / WINDOW_MS);
      if (!windows.has(w)) windows.set(w, []);
      windows.get(w)!.push(latency);
    }
    const bound = quantile(sorted, 0.5) * Number(values.slow);
    const slow = [...windows]
      .filter(
        ([, l]) =>
          quantile(
            l.sort((a, b) => a - b),
            0.5,
          ) > bound,
      )
      .sort((a, b) => a[0] - b[0]);
    let waiting = 0;
    console.log(
      `\n${slow.length} of ${windows.size} windows of ${WINDOW_MS} ms with a median over ${bound.toFixed(1)} ms (CPU ms per thread group in the window):`,
    );
    for (const [w, l] of slow) {
      const used = cpu.get(w);
      const total = used ? GROUPS.reduce((s, g) => s + used[g]!, 0) : NaN;
      if (total < WINDOW_MS / 2) waiting++;
      const detail = used ? GROUPS.map((g) => `${g} ${used[g]}`).join(', ') : 'no sample';
      console.log(
        `  ${((w * WINDOW_MS) / 1000).toFixed(1).padStart(5)} s  ${String(l.length).padStart(4)} answers, median ${quantile(l, 0.5).toFixed(0)} ms, max ${quantile(l, 1).toFixed(0)} ms  (${detail})`,
      );
    }
    console.log(`${waiting} of them with the server using under half a core (waiting rather than working)`);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
