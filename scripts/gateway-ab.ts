/**
 * gemforge's chat completions at two checkouts side by side, in one run: what a
 * change to the text path did, on a machine too loaded for `bench:gateway`'s
 * absolute figures. Each checkout (a directory with the repository and its
 * node_modules, e.g. `git worktree add --detach ../base main` and a symlinked
 * node_modules) runs its own server on the servers' core, in front of the same
 * fake upstream (bench/chat-upstream.ts) on the load core; the rounds alternate
 * which server is measured first (A B, B A, …), since whichever goes second
 * measured ~5–10 % slower in either order. Per round and row: the server's CPU
 * per completion (all its threads), its context switches per completion (each
 * round trip to node-sqlite3's thread pool is two: they count the hand-offs,
 * and move far less than CPU time on a loaded machine), req/s and p50. Then the
 * ratio second/first per round and its median, and `ledger verify` of both.
 *
 *   node --import tsx scripts/gateway-ab.ts BASE_DIR NEW_DIR [--rounds 6 --duration 3 --connections 32,1 --modes json,stream]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, LIMITS_NEVER_REACHED, pinning, runLoad, runMain, serverArgs, startScript, waitFor } from './bench/processes.ts';
import { seedBenchKey } from './bench/fixture.ts';
import type { LoadResult } from './bench/types.ts';
import { quantile } from './bench/quantile.ts';
import { openDb } from '../server/storage/db.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '6' },
    duration: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32,1' },
    modes: { type: 'string', default: 'json,stream' },
  },
});

interface Server {
  name: string;
  dataDir: string;
  secret: string;
  base: string;
  child: ChildProcess;
}

/** Context switches so far of every thread of `pid` (Linux /proc). */
function contextSwitches(pid: number): number {
  let n = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    } catch {
      /* the thread ended */
    }
  }
  return n;
}

/** gemforge from `root` (its own sources and node_modules) on a fresh data dir, on the servers' core. */
async function startAt(root: string, upstream: string): Promise<Server> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-ab-'));
  const secret = await seedBenchKey(dataDir);
  const port = await freePort();
  const server = serverArgs(root);
  const [cmd, args] = pinning ? ['taskset', ['-c', String(pinning.server), process.execPath, ...server]] : [process.execPath, server];
  const env = {
    ...process.env,
    ...LIMITS_NEVER_REACHED,
    DATA_DIR: dataDir,
    NODE_ENV: 'production',
    WORKER_ENABLED: 'false',
    LOG_LEVEL: 'warn',
    PORT: String(port),
    HOST: '127.0.0.1',
    TEXT_UPSTREAM_URL: `${upstream}/v1`,
    TEXT_UPSTREAM_MODELS: 'gemforge-text-1=bench-upstream-model',
  };
  const child = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`${base}/api/generate/models`, 401);
  return { name: path.basename(root), dataDir, secret, base, child };
}

async function stop(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

interface Measured extends LoadResult {
  switches: number;
}

async function measureOne(server: Server, mode: string, connections: number, warmup: number, duration: number): Promise<Measured> {
  const pid = server.child.pid!;
  const body = {
    model: 'gemforge-text-1',
    messages: [{ role: 'user', content: 'Say hello in one short sentence.' }],
    max_tokens: 16,
    stream: mode === 'stream',
  };
  // Warm-up first, apart: the switches are counted over the measurement only, as the load process counts CPU.
  const job = {
    kind: 'autocannon',
    url: `${server.base}/api/generate/text/v1/chat/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.secret}` },
    body: JSON.stringify(body),
    connections,
    freshIdempotencyKey: true,
    serverPid: pid,
  };
  if (warmup > 0) await runLoad<LoadResult>({ ...job, warmupSeconds: 0, durationSeconds: warmup });
  const before = contextSwitches(pid);
  const result = await runLoad<LoadResult>({ ...job, warmupSeconds: 0, durationSeconds: duration });
  return { ...result, switches: (contextSwitches(pid) - before) / Math.max(1, result.requests) };
}

const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );

async function main(): Promise<number> {
  if (positionals.length !== 2) throw new Error('usage: gateway-ab.ts BASE_DIR NEW_DIR');
  const rounds = Math.max(1, Number(values.rounds));
  const duration = Number(values.duration);
  const connections = values.connections.split(',').map(Number);
  const modes = values.modes.split(',');
  const upstream = await startScript('chat-upstream.ts', {}, pinning?.load);
  const servers: Server[] = [];
  try {
    for (const root of positionals) servers.push(await startAt(path.resolve(root), upstream.base));
    const results = new Map<string, Measured[][]>(); // row → per server → rounds
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const mode of modes) {
        for (const c of connections) {
          const row = `${mode}, ${c} connection${c === 1 ? '' : 's'}`;
          if (!results.has(row)) results.set(row, [[], []]);
          for (const i of order) {
            const m = await measureOne(servers[i]!, mode, c, round === 0 ? 2 : 0.5, duration);
            results.get(row)![i]!.push(m);
            console.log(
              `round ${round} ${row} ${servers[i]!.name}: ${m.rps.toFixed(0)} req/s, p50 ${m.p50} ms, CPU ${m.cpuUs} µs, ${m.switches.toFixed(1)} switches per completion`,
            );
          }
        }
      }
    }
    console.log(`\nsecond (${servers[1]!.name}) against first (${servers[0]!.name}), per round and median:`);
    for (const [row, [a, b]] of results) {
      const cpu = a.map((x, i) => b[i]!.cpuUs! / x.cpuUs!);
      const sw = a.map((x, i) => b[i]!.switches / x.switches);
      console.log(
        `${row.padEnd(24)} CPU per completion ${median(a.map((x) => x.cpuUs!))} → ${median(b.map((x) => x.cpuUs!))} µs (ratios ${cpu.map((x) => x.toFixed(2)).join(' ')}; median ${median(cpu).toFixed(2)}); ` +
          `switches ${median(a.map((x) => x.switches)).toFixed(1)} → ${median(b.map((x) => x.switches)).toFixed(1)} (median ratio ${median(sw).toFixed(2)}); ` +
          `p50 ${median(a.map((x) => x.p50))} → ${median(b.map((x) => x.p50))} ms`,
      );
    }
  } finally {
    for (const s of servers) await stop(s);
    await upstream.stop();
  }
  let clean = true;
  for (const s of servers) {
    const db = await openDb({ dataDir: s.dataDir });
    try {
      const verified = (await verifyLedger(db, [])).ok;
      clean &&= verified;
      console.log(`${s.name}: ledger verify ${verified ? 'clean' : 'FAILED'}`);
    } finally {
      await db.destroy();
      fs.rmSync(s.dataDir, { recursive: true, force: true });
    }
  }
  console.log(
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} on ${os.availableParallelism()} cores`,
  );
  return clean ? 0 : 1;
}

runMain(main);
