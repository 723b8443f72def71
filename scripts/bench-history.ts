/**
 * Does an account's history slow down its requests? Two installations (embedded
 * SQLite, NODE_ENV=production, worker off so submissions only queue), each with one
 * account: one with about 1,000 ledger rows of history, one with about 1,000,000
 * (scripts/seed-history.ts). Both servers run as child processes; this process is
 * the load generator (autocannon, 8 connections). Measured in rounds, both sizes
 * back to back in each, so that the machine's other load hits both alike:
 *
 *   - new image submissions (POST /api/generate/image, a fresh Idempotency-Key each)
 *   - task reads (GET /api/generate/tasks/{id})
 *
 * Prints p50 per size (median of the rounds) and the ratio 1M / 1k for each (the
 * median of the rounds' ratios), PASS when both ratios are ≤ 1.3 (exit code 1
 * otherwise), and writes bench/history.json with every round's figures.
 *
 *   node --import tsx scripts/bench-history.ts [-- --large 1000000 --seconds 4 --rounds 5]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { openDb } from '../server/storage/db.ts';
import { freePort, LIMITS_NEVER_REACHED, serverArgs, waitFor } from './bench/processes.ts';
import { seedAccount, type SeededAccount } from './seed-history.ts';

const { values } = parseArgs({
  options: {
    small: { type: 'string', default: '1000' },
    large: { type: 'string', default: '1000000' },
    seconds: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '8' },
  },
});
const TARGET = 1.3;
const root = path.resolve(import.meta.dirname, '..');
const IMAGE = { model: 'gemforge-image-1', prompt: 'a lighthouse on a basalt cliff', parameters: { ratio: '1:1', resolution: '1024', outputCount: 1 } };

/** The part of autocannon's API used here (the package ships no types). */
interface CannonRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (req: CannonRequest) => CannonRequest;
}
interface CannonOptions {
  url: string;
  headers?: Record<string, string>;
  requests?: CannonRequest[];
  connections?: number;
  duration?: number;
}
interface CannonInstance extends PromiseLike<{ requests: { average: number }; non2xx: number; errors: number }> {
  on(event: 'response', fn: (client: unknown, status: number, bytes: number, responseTime: number) => void): void;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (opts: CannonOptions) => CannonInstance;

interface Installation {
  entries: number;
  dataDir: string;
  account: SeededAccount;
  child: ChildProcess;
  base: string;
  taskId: string;
  submitP50: number[];
  readP50: number[];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function install(entries: number): Promise<Installation> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `gemforge-bench-history-${entries}-`));
  const started = Date.now();
  const db = await openDb({ dataDir });
  const account = await seedAccount(db, entries, 1_000_000_000);
  const rows = Number((await db('ledger_entries').where({ account_id: account.accountId }).count({ n: '*' }).first())?.n);
  await db.destroy();
  console.log(`seeded ${rows.toLocaleString('en')} ledger rows in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const port = await freePort();
  const child = spawn(process.execPath, serverArgs(), {
    cwd: root,
    env: {
      ...process.env,
      ...LIMITS_NEVER_REACHED,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      NODE_ENV: 'production',
      WORKER_ENABLED: 'false',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`${base}/api/generate/models`, 200, { headers: { authorization: `Bearer ${account.secret}` } });
  const res = await fetch(`${base}/api/generate/image`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.secret}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
    body: JSON.stringify(IMAGE),
  });
  if (res.status !== 202) throw new Error(`a submission answered ${res.status}: ${await res.text()}`);
  const taskId = ((await res.json()) as { task: { id: string } }).task.id;
  return { entries: rows, dataDir, account, child, base, taskId, submitP50: [], readP50: [] };
}

/** One autocannon run; the p50 of 2xx response times in ms, from every response (autocannon's own histogram rounds to whole ms). */
async function measure(opts: CannonOptions): Promise<{ p50: number; rps: number; errors: number }> {
  const times: number[] = [];
  const instance = autocannon({ ...opts, connections: Number(values.connections), duration: Number(values.seconds) });
  instance.on('response', (_client, status, _bytes, responseTime) => {
    if (status >= 200 && status < 300) times.push(responseTime);
  });
  const result = await instance;
  return { p50: median(times), rps: result.requests.average, errors: result.non2xx + result.errors };
}

/** New image submissions at full load: p50 in ms. */
async function submissions(inst: Installation): Promise<number> {
  const run = await measure({
    url: `${inst.base}/api/generate/image`,
    requests: [
      {
        method: 'POST',
        headers: { authorization: `Bearer ${inst.account.secret}`, 'content-type': 'application/json' },
        body: JSON.stringify(IMAGE),
        setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'idempotency-key': crypto.randomUUID() } }),
      },
    ],
  });
  return report(inst, 'submit', run);
}

/** Reads of one task at full load: p50 in ms. */
async function reads(inst: Installation): Promise<number> {
  const run = await measure({ url: `${inst.base}/api/generate/tasks/${inst.taskId}`, headers: { authorization: `Bearer ${inst.account.secret}` } });
  return report(inst, 'task GET', run);
}

function report(inst: Installation, what: string, run: { p50: number; rps: number; errors: number }): number {
  if (run.errors) throw new Error(`${inst.entries} rows: ${run.errors} failed (${what})`);
  console.log(`${inst.entries.toLocaleString('en').padStart(9)} rows: ${what} p50 ${run.p50.toFixed(2)} ms (${run.rps.toFixed(0)}/s)`);
  return run.p50;
}

async function stop(inst: Installation): Promise<void> {
  if (inst.child.exitCode === null) {
    inst.child.kill('SIGTERM');
    await new Promise((r) => inst.child.once('exit', r));
  }
  fs.rmSync(inst.dataDir, { recursive: true, force: true });
}

async function main(): Promise<number> {
  const installs: Installation[] = [];
  try {
    installs.push(await install(Number(values.small)));
    installs.push(await install(Number(values.large)));
    // Each round measures both sizes back to back (alternating which goes first), so
    // the machine's other load hits both alike; the ratio is the median of the
    // rounds' ratios.
    for (let r = 0; r < Number(values.rounds); r++) {
      const order = r % 2 ? [...installs].reverse() : installs;
      for (const inst of order) inst.submitP50.push(await submissions(inst));
      for (const inst of order) inst.readP50.push(await reads(inst));
    }
    const [small, large] = installs;
    const ratio = (of: (inst: Installation) => number[]) => median(of(large).map((p50, r) => p50 / of(small)[r]));
    const rows = [
      { measure: 'submission p50 (ms)', small: median(small.submitP50), large: median(large.submitP50), ratio: ratio((i) => i.submitP50) },
      { measure: 'task GET p50 (ms)', small: median(small.readP50), large: median(large.readP50), ratio: ratio((i) => i.readP50) },
    ].map((row) => ({ ...row, pass: row.ratio <= TARGET }));

    console.log(`\n| measure | ${small.entries.toLocaleString('en')} rows | ${large.entries.toLocaleString('en')} rows | ratio | target ≤ ${TARGET} |`);
    console.log('|---|---|---|---|---|');
    for (const row of rows) {
      console.log(`| ${row.measure} | ${row.small.toFixed(2)} | ${row.large.toFixed(2)} | ${row.ratio.toFixed(2)} | ${row.pass ? 'PASS' : 'MISS'} |`);
    }
    const out = path.join(root, 'bench', 'history.json');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(
      out,
      `${JSON.stringify(
        {
          at: new Date().toISOString(),
          connections: Number(values.connections),
          secondsPerRun: Number(values.seconds),
          rounds: Number(values.rounds),
          ledgerRows: { small: small.entries, large: large.entries },
          target: TARGET,
          rows,
          perRound: { submitP50: { small: small.submitP50, large: large.submitP50 }, readP50: { small: small.readP50, large: large.readP50 } },
        },
        null,
        2,
      )}\n`,
    );
    console.log(`wrote ${path.relative(root, out)}`);
    return rows.every((row) => row.pass) ? 0 : 1;
  } finally {
    for (const inst of installs) await stop(inst);
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
