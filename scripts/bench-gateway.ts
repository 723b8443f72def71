/**
 * gemforge as a text gateway, side by side with a bare `node:http` pipe proxy
 * (bench/pipe-proxy.ts) in front of the same fake OpenAI-compatible upstream
 * (bench/chat-upstream.ts, answering at once): chat completions as JSON and as
 * a stream, at 1 and 32 connections. The servers share one pinned core; the
 * load generator and the upstream the other. Every row is measured in rounds,
 * each right after the proxy's own measurement of the same request (bench/rounds.ts),
 * so a busy machine slows both sides alike. Printed per row: req/s as a share of
 * the proxy's, latency (p50/p99, and at one connection what gemforge adds to the
 * proxy's p50), server CPU per forwarded request; then gemforge's RSS after the
 * rows and whether metering stayed exact (`ledger verify` over every charge).
 *
 * Targets (docs/performance.md, "Text gateway"): CPU per forwarded request at most
 * 3× the proxy's; latency added at one connection ≤ 2 ms p50; time to the first
 * streamed chunk ≤ 4 ms. A MISS exits 0 unless `--strict` (timings on a shared
 * machine are evidence, not a gate); a row that could not be measured exits 1.
 *
 *   npm run bench:gateway [-- --duration 6 --rounds 3 --warmup 3 --strict]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { seedBenchKey } from './bench/fixture.ts';
import { pinning, runMain, startGemforge, startScript, type Started } from './bench/processes.ts';
import { measure, row, type Case } from './bench/rounds.ts';
import type { Row } from './bench/report.ts';
import { openDb } from '../server/storage/db.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    strict: { type: 'boolean', default: false },
  },
});
const OPTIONS = { duration: Number(values.duration), rounds: Math.max(1, Number(values.rounds)), warmup: Number(values.warmup), rewarm: 1 };

const UPSTREAM_MODEL = 'bench-upstream-model';
const MESSAGES = [{ role: 'user', content: 'Say hello in one short sentence.' }];

/** Resident set size of a process in MiB (Linux /proc). */
function rssMib(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

interface Pair {
  name: string;
  connections: number;
  stream: boolean;
  firstChunk?: boolean;
}

const PAIRS: Pair[] = [
  { name: 'JSON, 1 connection', connections: 1, stream: false },
  { name: 'JSON, 32 connections', connections: 32, stream: false },
  { name: 'stream, 1 connection', connections: 1, stream: true },
  { name: 'stream, 32 connections', connections: 32, stream: true },
  { name: 'stream first chunk, 1 connection', connections: 1, stream: true, firstChunk: true },
];

function cases(pair: Pair, proxy: Started, gemforge: Started, secret: string): { proxyCase: Case; gemforgeCase: Case } {
  const job = (url: string, model: string, headers: Record<string, string>, pid: number | undefined, fresh: boolean): Case['job'] => ({
    kind: pair.firstChunk ? 'node' : 'autocannon',
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model, messages: MESSAGES, max_tokens: 16, ...(pair.stream && { stream: true }) }),
    ...(fresh && { freshIdempotencyKey: true }),
    ...(pair.firstChunk && { firstChunk: true }),
    serverPid: pid,
  });
  return {
    proxyCase: {
      name: `proxy ${pair.name}`,
      connections: pair.connections,
      expect: [200],
      job: job(`${proxy.base}/v1/chat/completions`, UPSTREAM_MODEL, {}, proxy.child.pid, false),
    },
    gemforgeCase: {
      name: `gemforge ${pair.name}`,
      connections: pair.connections,
      expect: [200],
      job: job(`${gemforge.base}/api/generate/text/v1/chat/completions`, 'gemforge-text-1', { authorization: `Bearer ${secret}` }, gemforge.child.pid, true),
    },
  };
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-gateway-'));
  console.log(
    `Node ${process.version}; ${pinning ? `servers on core ${pinning.server}, load and upstream on core ${pinning.load}` : 'no CPU pinning'}; ${OPTIONS.rounds} rounds per row`,
  );
  const upstream = await startScript('chat-upstream.ts', {}, pinning?.load);
  const proxy = await startScript('pipe-proxy.ts', { UPSTREAM_URL: upstream.base });
  const secret = await seedBenchKey(dataDir);
  const gemforge = await startGemforge(
    {
      DATA_DIR: dataDir,
      NODE_ENV: 'production',
      WORKER_ENABLED: 'false',
      LOG_LEVEL: 'warn',
      TEXT_UPSTREAM_URL: `${upstream.base}/v1`,
      TEXT_UPSTREAM_MODELS: `gemforge-text-1=${UPSTREAM_MODEL}`,
    },
    path.join(dataDir, 'server.log'),
  );
  const rows: Array<Row & { addedP50?: number }> = [];
  let answered = 0;
  try {
    for (const pair of PAIRS) {
      const { proxyCase, gemforgeCase } = cases(pair, proxy, gemforge, secret);
      const r: Row & { addedP50?: number } = await row(gemforgeCase, proxyCase, OPTIONS);
      answered += r.statuses['200'] ?? 0;
      if (pair.connections === 1) {
        // The proxy's own latency right after, for what gemforge adds to it.
        const base = await measure(proxyCase, 1, OPTIONS.duration / OPTIONS.rounds);
        r.addedP50 = r.p50 - base.p50;
      }
      rows.push(r);
    }
    const rss = rssMib(gemforge.child.pid!);
    await gemforge.stop();
    const db = await openDb({ dataDir });
    let verified: boolean;
    let charges: number;
    try {
      verified = (await verifyLedger(db, [verifyTasks])).ok;
      charges = Number(((await db('ledger_entries').where({ type: 'post' }).count({ n: '*' })) as Array<{ n: number | string }>)[0]!.n);
    } finally {
      await db.destroy();
    }

    console.log('\nrow                                        req/s (share of proxy)   p50 / p99          added p50   CPU per request (proxy share)');
    for (const r of rows) {
      const cpu = r.cpuUs !== undefined ? `${r.cpuUs} µs (${r.cpuRatio !== undefined ? `${(1 / r.cpuRatio).toFixed(1)}× the proxy's` : '?'})` : 'n/a';
      console.log(
        `${r.name.padEnd(43)}${`${r.rps.toFixed(0)} (${(100 * r.ratio).toFixed(1)} %)`.padEnd(25)}${`${r.p50} / ${r.p99} ms`.padEnd(19)}${(r.addedP50 !== undefined ? ms(r.addedP50) : '').padEnd(12)}${cpu}${r.problem ? `  NOT MEASURED: ${r.problem}` : ''}`,
      );
    }
    console.log(
      `gemforge RSS after ${answered} measured completions (and their warm-ups): ${rss.toFixed(0)} MiB; metering: ledger verify ${verified ? 'clean' : 'FAILED'} over ${charges} ledger posts`,
    );

    const cpuTimes = rows.filter((r) => r.cpuRatio !== undefined && r.connections === 32).map((r) => 1 / r.cpuRatio!);
    const worstCpu = Math.max(...cpuTimes);
    const added = rows.find((r) => r.name.startsWith('gemforge JSON, 1'))?.addedP50 ?? NaN;
    const firstChunk = rows.find((r) => r.name.includes('first chunk'))?.p50 ?? NaN;
    const checks = [
      { name: 'CPU per forwarded request (32 connections) ≤ 3× the proxy', measured: `${worstCpu.toFixed(1)}×`, pass: worstCpu <= 3 },
      { name: 'latency added at one connection (JSON) ≤ 2 ms p50', measured: ms(added), pass: added <= 2 },
      { name: 'time to the first streamed chunk ≤ 4 ms p50', measured: ms(firstChunk), pass: firstChunk <= 4 },
      { name: 'metering exact (ledger verify clean)', measured: verified ? 'clean' : 'failed', pass: verified },
    ];
    for (const c of checks) console.log(`${c.pass ? 'PASS' : 'MISS'}  ${c.name}: ${c.measured}`);
    const broken = rows.filter((r) => r.problem).length > 0 || !verified;
    const missed = checks.some((c) => !c.pass);
    return broken || (values.strict && missed) ? 1 : 0;
  } finally {
    await gemforge.stop();
    await proxy.stop();
    await upstream.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runMain(main);
