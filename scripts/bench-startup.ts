/**
 * A server that starts small: how long from process start to the first served
 * chat completion, the resident memory once idle, and after many completions,
 * for gemforge as production runs it (the compiled server, `node dist/server.mjs`,
 * and the whole `npm start` with its freshness check), gemforge from its sources
 * (`node --import tsx server/main.ts`, as production ran before the build step),
 * and, side by side, a bare `node:http` pipe proxy (bench/pipe-proxy.ts) in front
 * of the same fake upstream (bench/chat-upstream.ts). Servers run on one pinned
 * core, the upstream and this process on the other, as in bench:gateway.
 *
 * Start is timed from spawn() to the first 200 of a completion polled every few
 * milliseconds; idle RSS is read 3 s after that first completion; "after N" is
 * read right after N more completions (8 connections, fresh Idempotency-Keys),
 * and again once they have paused (server/memory.ts gives memory back then).
 *
 * Targets (docs/performance.md, "Start-up and memory"), for the compiled server:
 * first completion ≤ 1 s after start, idle RSS ≤ 120 MB, RSS after 10,000
 * completions ≤ 200 MB. A MISS exits 0 unless `--strict` (a shared machine's
 * timings are evidence, not a gate); a server that does not serve exits 1.
 *
 * `--baseline DIR` adds, in the same interleaved rounds, the compiled server of
 * another checkout (a detached worktree of main, node_modules linked; built
 * there first when stale) under the Node flags of its own `npm start`: the
 * side-by-side comparison a shared machine allows.
 *
 *   npm run bench:startup [-- --rounds 3 --requests 10000 --settle-ms 3000 --strict --baseline ../wt-main]
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import crypto from 'node:crypto';
import { seedBenchKey } from './bench/fixture.ts';
import { freePort, LIMITS_NEVER_REACHED, pinning, root, runMain, startScript } from './bench/processes.ts';
import { SERVER_ARGS, COMPILED_SERVER_ARGS } from '../server/node-flags.ts';
import { quantile } from './bench/quantile.ts';
import { QUIET_MS } from '../server/memory.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    requests: { type: 'string', default: '10000' },
    'settle-ms': { type: 'string', default: '3000' },
    strict: { type: 'boolean', default: false },
    baseline: { type: 'string' },
  },
});
const ROUNDS = Math.max(1, Number(values.rounds));
const REQUESTS = Number(values.requests);
const SETTLE_MS = Number(values['settle-ms']);
const CONNECTIONS = 8;
const UPSTREAM_MODEL = 'bench-upstream-model';
const MB = 1e6;

/**
 * Resident set size in bytes (Linux /proc) of the process that serves: the
 * deepest descendant of `pid` (`npm start` stays the parent of the shell that
 * execs node), tsx's esbuild service aside.
 */
function serving(pid: number): number {
  for (;;) {
    const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    // Not into tsx's esbuild service process: the server is its parent.
    const next = children.find((c) => !fs.readFileSync(`/proc/${c}/comm`, 'utf8').startsWith('esbuild'));
    if (next === undefined) return pid;
    pid = Number(next);
  }
}

function rss(pid: number): number {
  const status = fs.readFileSync(`/proc/${serving(pid)}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

/**
 * CPU time in ms (user and system, all threads) the serving process has used: to its first
 * completion, a figure other processes on a shared machine move far less than the wall time.
 */
function cpuMs(pid: number): number {
  const fields = fs
    .readFileSync(`/proc/${serving(pid)}/stat`, 'utf8')
    .split(') ')[1]!
    .split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

interface Subject {
  name: string;
  /** The command line (argv[0] first) and its environment. */
  command(env: Record<string, string>): [string, string[]];
  /** The completions URL path and the headers a request needs. */
  path: string;
  headers: Record<string, string>;
  body: string;
  /** The variable that names its port. */
  portVariable: string;
  /** Whether the N-completions row is run (slow servers get only the start rows). */
  load: boolean;
  /** The checkout it runs in (this one unless --baseline). */
  cwd?: string;
}

const node = (args: readonly string[]): [string, string[]] =>
  pinning ? ['taskset', ['-c', String(pinning.server), process.execPath, ...args]] : [process.execPath, [...args]];

/** One POST; resolves with its status, or 0 when the connection is refused or breaks. */
function post(port: number, subject: Subject, agent: http.Agent | false): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: subject.path,
        method: 'POST',
        agent,
        headers: { ...subject.headers, 'idempotency-key': `bench-${crypto.randomUUID()}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(subject.body);
  });
}

interface Run {
  firstMs: number;
  /** The server's CPU time to its first completion (ms). */
  firstCpuMs: number;
  idle: number;
  afterLoad?: number;
  /** RSS once the requests have paused for a while (server/memory.ts's collection has run). */
  afterQuiet?: number;
  failed?: number;
}

async function runOnce(subject: Subject, env: Record<string, string>, load: boolean): Promise<Run> {
  const port = await freePort();
  const [cmd, args] = subject.command(env);
  const started = performance.now();
  const child = spawn(cmd, args, {
    cwd: subject.cwd ?? root,
    env: { ...process.env, ...env, [subject.portVariable]: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    let status = 0;
    while (status !== 200) {
      if (child.exitCode !== null) throw new Error(`${subject.name} exited with ${child.exitCode} before serving`);
      if (performance.now() - started > 120_000) throw new Error(`${subject.name} served no completion within 120 s`);
      status = await post(port, subject, false);
      if (status !== 200) await new Promise((r) => setTimeout(r, 5));
    }
    const firstMs = performance.now() - started;
    const firstCpuMs = cpuMs(child.pid!);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const idle = rss(child.pid!);
    if (!load) return { firstMs, firstCpuMs, idle };
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    let sent = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (sent < REQUESTS) {
          sent++;
          if ((await post(port, subject, agent)) !== 200) failed++;
        }
      }),
    );
    agent.destroy();
    const afterLoad = rss(child.pid!);
    await new Promise((r) => setTimeout(r, SETTLE_MS + 2 * QUIET_MS));
    return { firstMs, firstCpuMs, idle, afterLoad, afterQuiet: rss(child.pid!), failed };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const mb = (b: number | undefined) => (b === undefined ? '' : `${(b / MB).toFixed(0)} MB`);

async function main(): Promise<number> {
  // What `npm start` would do first: compile when dist/ is missing or stale, so no round pays for it.
  const baseline = values.baseline === undefined ? undefined : path.resolve(values.baseline);
  for (const tree of baseline ? [root, baseline] : [root]) {
    const built = spawnSync(process.execPath, [path.join(tree, 'scripts/build.mjs'), '--if-stale'], { cwd: tree, stdio: 'inherit' });
    if (built.status !== 0) return 1;
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-startup-'));
  console.log(
    `${os.loadavg()[0].toFixed(1)} load average at the start; Node ${process.version}; ${pinning ? `servers on core ${pinning.server}, upstream and client on core ${pinning.load}` : 'no CPU pinning'}; ${ROUNDS} rounds; ${REQUESTS} completions at ${CONNECTIONS} connections`,
  );
  const upstream = await startScript('chat-upstream.ts', {}, pinning?.load);
  try {
    const secret = await seedBenchKey(dataDir);
    const body = JSON.stringify({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }], max_tokens: 16 });
    const gemforge = {
      portVariable: 'PORT',
      path: '/api/generate/text/v1/chat/completions',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      body,
    };
    const gemforgeEnv = {
      ...LIMITS_NEVER_REACHED,
      DATA_DIR: dataDir,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      TEXT_UPSTREAM_URL: `${upstream.base}/v1`,
      TEXT_UPSTREAM_MODELS: `gemforge-text-1=${UPSTREAM_MODEL}`,
    };
    const subjects: Array<Subject & { env: Record<string, string> }> = [
      {
        name: 'bare node:http pipe proxy',
        // Node's own type stripping runs it: no tsx loaded, as a bare proxy would be deployed.
        command: () => node([path.join(root, 'scripts/bench/pipe-proxy.ts')]),
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body: body.replace('gemforge-text-1', UPSTREAM_MODEL),
        portVariable: 'PROXY_PORT',
        load: true,
        env: { UPSTREAM_URL: upstream.base },
      },
      { name: 'gemforge compiled (node dist/server.mjs)', command: () => node(COMPILED_SERVER_ARGS), ...gemforge, load: true, env: gemforgeEnv },
      {
        name: 'gemforge npm start',
        // npm itself is not pinned (it execs node, which then is not either): what an operator runs.
        command: () => ['npm', ['start', '--silent']],
        ...gemforge,
        load: false,
        env: gemforgeEnv,
      },
      { name: 'gemforge from sources (tsx)', command: () => node(SERVER_ARGS), ...gemforge, load: false, env: gemforgeEnv },
    ];
    if (baseline) {
      // The baseline's compiled server under the flags its own `npm start` gives it.
      const start = (JSON.parse(fs.readFileSync(path.join(baseline, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
      const flags = /exec node (.*?)\s*dist\/server\.mjs/.exec(start)?.[1]?.split(/\s+/).filter(Boolean) ?? [];
      const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: baseline, encoding: 'utf8' }).stdout.trim();
      subjects.splice(2, 0, {
        name: `baseline compiled (${commit})`,
        command: () => node([...flags, 'dist/server.mjs']),
        ...gemforge,
        load: true,
        env: gemforgeEnv,
        cwd: baseline,
      });
    }
    const results: Array<{ name: string; first: number[]; firstCpu: number[]; idle: number[]; afterLoad?: number; afterQuiet?: number; failed?: number }> =
      subjects.map((s) => ({
        name: s.name,
        first: [],
        firstCpu: [],
        idle: [],
      }));
    // Interleaved rounds: a busy spell of the machine falls on every subject alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, subject] of subjects.entries()) {
        const loadNow = subject.load && round === ROUNDS - 1;
        const r = await runOnce(subject, subject.env, loadNow);
        results[i]!.first.push(r.firstMs);
        results[i]!.firstCpu.push(r.firstCpuMs);
        results[i]!.idle.push(r.idle);
        if (loadNow) Object.assign(results[i]!, { afterLoad: r.afterLoad, afterQuiet: r.afterQuiet, failed: r.failed });
      }
    }
    console.log(
      `\n${'server'.padEnd(44)}${'start → first completion (median, min–max)'.padEnd(46)}${'its CPU'.padEnd(10)}${'idle RSS'.padEnd(12)}${`RSS after ${REQUESTS}`.padEnd(18)}then quiet`,
    );
    for (const r of results) {
      const first = `${median(r.first).toFixed(0)} ms (${Math.min(...r.first).toFixed(0)}–${Math.max(...r.first).toFixed(0)})`;
      console.log(
        `${r.name.padEnd(44)}${first.padEnd(46)}${`${median(r.firstCpu).toFixed(0)} ms`.padEnd(10)}${mb(median(r.idle)).padEnd(12)}${mb(r.afterLoad).padEnd(18)}${mb(r.afterQuiet)}${r.failed ? `  (${r.failed} not 200)` : ''}`,
      );
    }
    const compiled = results[1]!;
    const checks = [
      {
        name: 'first completion ≤ 1 s after process start (compiled, median)',
        measured: `${median(compiled.first).toFixed(0)} ms`,
        pass: median(compiled.first) <= 1000,
      },
      { name: 'idle RSS ≤ 120 MB (compiled, median)', measured: mb(median(compiled.idle)), pass: median(compiled.idle) <= 120 * MB },
      { name: `RSS after ${REQUESTS} completions ≤ 200 MB (compiled)`, measured: mb(compiled.afterLoad), pass: (compiled.afterLoad ?? Infinity) <= 200 * MB },
    ];
    for (const c of checks) console.log(`${c.pass ? 'PASS' : 'MISS'}  ${c.name}: ${c.measured}`);
    console.log(`${os.loadavg()[0].toFixed(1)} load average at the end`);
    const broken = results.some((r) => (r.failed ?? 0) > 0);
    return broken || (values.strict && checks.some((c) => !c.pass)) ? 1 : 0;
  } finally {
    await upstream.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runMain(main);
