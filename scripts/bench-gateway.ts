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
 * Portkey's TypeScript gateway is an optional peer (bench/portkey.ts): installed on
 * demand into a cache folder outside the project, started on the servers' core,
 * checked to forward JSON and streams, then measured in the same rounds, right after
 * gemforge, each of its rows printed below gemforge's. `--no-portkey` leaves it out;
 * when it cannot be installed or does not forward, the bench says why and goes on.
 *
 * Targets (docs/performance.md, "Text gateway"): CPU per forwarded request at most
 * Portkey's in the same run (at most 3× the proxy's when Portkey did not run);
 * latency added at one connection ≤ 2 ms p50; time to the first streamed chunk
 * ≤ 4 ms. A MISS exits 0 unless `--strict` (timings on a shared machine are
 * evidence, not a gate); a row of gemforge's that could not be measured exits 1
 * (one of Portkey's only leaves the target at the proxy's).
 *
 *   npm run bench:gateway [-- --duration 6 --rounds 3 --warmup 3 --strict --no-portkey]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { seedBenchKey } from './bench/fixture.ts';
import { pinning, runMain, startGemforge, startScript, type Started } from './bench/processes.ts';
import { installPortkey, checkForwarding, portkeyHeaders, startPortkey, PORTKEY_VERSION, portkeyDir } from './bench/portkey.ts';
import { measure, median, rowsInRounds, type Case, type Measured } from './bench/rounds.ts';
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
    portkey: { type: 'boolean', default: true },
  },
  allowNegative: true,
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

function cases(
  pair: Pair,
  proxy: Started,
  gemforge: Started,
  secret: string,
  peer: { portkey: Started; upstream: string } | undefined,
): { proxyCase: Case; gemforgeCase: Case; portkeyCase?: Case } {
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
    ...(peer && {
      portkeyCase: {
        name: `portkey ${pair.name}`,
        connections: pair.connections,
        expect: [200],
        job: job(`${peer.portkey.base}/v1/chat/completions`, UPSTREAM_MODEL, portkeyHeaders(`${peer.upstream}/v1`), peer.portkey.child.pid, false),
      },
    }),
  };
}

/** Portkey started and checked, or undefined (having said why) when it is left out or cannot forward. */
async function startPeer(upstream: string, dataDir: string): Promise<Started | undefined> {
  if (!values.portkey) {
    console.log('Portkey: not run (--no-portkey)');
    return undefined;
  }
  console.log(`Portkey: @portkey-ai/gateway ${PORTKEY_VERSION} from ${portkeyDir()} (installed there on first use) …`);
  const log = path.join(dataDir, 'portkey.log');
  // The data dir goes when the bench ends: a failure quotes the end of Portkey's log instead of pointing at it.
  const logTail = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').slice(-5).join(' | ') : '');
  let portkey: Started;
  try {
    const installed = await installPortkey();
    if ('reason' in installed) {
      console.log(`Portkey: not run: ${installed.reason}`);
      return undefined;
    }
    portkey = await startPortkey(installed.entry, log);
  } catch (error) {
    console.log(`Portkey: not run: ${(error as Error).message}; its log ends: ${logTail()}`);
    return undefined;
  }
  const problem = await checkForwarding(`${portkey.base}/v1/chat/completions`, portkeyHeaders(`${upstream}/v1`), {
    model: UPSTREAM_MODEL,
    messages: MESSAGES,
    max_tokens: 16,
  });
  if (problem) {
    await portkey.stop();
    console.log(`Portkey: not run: it did not forward a completion (${problem}); its log ends: ${logTail()}`);
    return undefined;
  }
  console.log('Portkey: forwards JSON and streamed completions; measured in the same rounds, right after gemforge');
  return portkey;
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

/** gemforge's CPU per request over Portkey's, median over the rounds in which both were measured with it. */
function cpuOver(gemforge: Measured[], portkey: Measured[]): number | undefined {
  const ratios = gemforge.flatMap((g, i) => {
    const p = portkey[i]?.cpuUs;
    return g.cpuUs && p ? [g.cpuUs / p] : [];
  });
  return ratios.length ? median(ratios) : undefined;
}

/**
 * The CPU target: gemforge's CPU per forwarded request at 32 connections at most Portkey's, the
 * worse of JSON and streaming, where every such row of both was measured with its CPU in the same
 * rounds; otherwise at most 3× the proxy's.
 */
function cpuTarget(rows: Row[], peerRows: Map<string, Row & { cpuOverPeer?: number }>, portkeyRan: boolean): { name: string; measured: string; pass: boolean } {
  const busy = rows.filter((r) => r.connections === 32);
  const pairs = busy.flatMap((r) => {
    const peer = peerRows.get(r.name);
    return !r.problem && peer && !peer.problem && peer.cpuOverPeer !== undefined ? [{ r, peer, over: peer.cpuOverPeer }] : [];
  });
  if (pairs.length > 0 && pairs.length === busy.length) {
    const worst = Math.max(...pairs.map((p) => p.over));
    const each = pairs.map(({ r, peer }) => `${r.name.replace(/^gemforge /, '')}: ${r.cpuUs} vs ${peer.cpuUs} µs`).join('; ');
    return {
      name: "gemforge's CPU per forwarded request (32 connections) ≤ Portkey's in this run",
      measured: `${worst.toFixed(2)}× Portkey's (${each})`,
      pass: worst <= 1,
    };
  }
  const worstCpu = Math.max(...busy.filter((r) => r.cpuRatio !== undefined).map((r) => 1 / r.cpuRatio!));
  const note = portkeyRan ? " (Portkey's rows not all measured)" : '';
  return { name: 'CPU per forwarded request (32 connections) ≤ 3× the proxy', measured: `${worstCpu.toFixed(1)}×${note}`, pass: worstCpu <= 3 };
}

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
  // After gemforge, so a failed start of gemforge leaves no Portkey behind; a peer that fails says why and is left out.
  const portkey = await startPeer(upstream.base, dataDir);
  const rows: Array<Row & { addedP50?: number }> = [];
  // Portkey's row of each pair (by gemforge's row name), and gemforge's CPU per request over Portkey's, round by round.
  const peerRows = new Map<string, Row & { addedP50?: number; cpuOverPeer?: number }>();
  let answered = 0;
  let peerAnswered = 0;
  try {
    for (const pair of PAIRS) {
      const { proxyCase, gemforgeCase, portkeyCase } = cases(pair, proxy, gemforge, secret, portkey && { portkey, upstream: upstream.base });
      const measured = await rowsInRounds([{ c: gemforgeCase }, ...(portkeyCase ? [{ c: portkeyCase }] : [])], proxyCase, OPTIONS);
      const r: Row & { addedP50?: number } = measured.rows[0]!;
      const peer: (Row & { addedP50?: number; cpuOverPeer?: number }) | undefined = measured.rows[1];
      answered += r.statuses['200'] ?? 0;
      if (pair.connections === 1) {
        // The proxy's own latency right after, for what gemforge adds to it.
        const base = await measure(proxyCase, 1, OPTIONS.duration / OPTIONS.rounds);
        r.addedP50 = r.p50 - base.p50;
        if (peer) peer.addedP50 = peer.p50 - base.p50;
      }
      rows.push(r);
      if (peer) {
        peerAnswered += peer.statuses['200'] ?? 0;
        peer.cpuOverPeer = cpuOver(measured.runs[0]!, measured.runs[1]!);
        peerRows.set(r.name, peer);
      }
    }
    const rss = rssMib(gemforge.child.pid!);
    const peerRss = portkey && rssMib(portkey.child.pid!);
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
    const line = (r: Row & { addedP50?: number }) => {
      const cpu = r.cpuUs !== undefined ? `${r.cpuUs} µs (${r.cpuRatio !== undefined ? `${(1 / r.cpuRatio).toFixed(1)}× the proxy's` : '?'})` : 'n/a';
      console.log(
        `${r.name.padEnd(43)}${`${r.rps.toFixed(0)} (${(100 * r.ratio).toFixed(1)} %)`.padEnd(25)}${`${r.p50} / ${r.p99} ms`.padEnd(19)}${(r.addedP50 !== undefined ? ms(r.addedP50) : '').padEnd(12)}${cpu}${r.problem ? `  NOT MEASURED: ${r.problem}` : ''}`,
      );
    };
    for (const r of rows) {
      line(r);
      const peer = peerRows.get(r.name);
      if (peer) line(peer);
    }
    console.log(
      `gemforge RSS after ${answered} measured completions (and their warm-ups): ${rss.toFixed(0)} MiB; metering: ledger verify ${verified ? 'clean' : 'FAILED'} over ${charges} ledger posts`,
    );
    if (peerRss !== undefined) console.log(`Portkey RSS after ${peerAnswered} measured completions (and their warm-ups): ${peerRss.toFixed(0)} MiB`);

    const added = rows.find((r) => r.name.startsWith('gemforge JSON, 1'))?.addedP50 ?? NaN;
    const firstChunk = rows.find((r) => r.name.includes('first chunk'))?.p50 ?? NaN;
    const checks = [
      cpuTarget(rows, peerRows, portkey !== undefined),
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
    await portkey?.stop();
    await proxy.stop();
    await upstream.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runMain(main);
