/**
 * Request throughput and latency, side by side. Starts a bare
 * `node:http` JSON server, a bare Express 5 JSON server, gemforge (embedded
 * SQLite, NODE_ENV=production, worker off) and the Prism mock of the contract,
 * on one pinned core, and drives each from a load process pinned to the other
 * core (autocannon; node:http's client for HEAD and time to first chunk). Every
 * row is measured in rounds, each right after a measurement of the bare
 * node:http server (kept running, idle in between), and every measurement,
 * baseline or row, after a warm-up of its own: its ratio is to
 * that neighbouring baseline, so a busy machine slows both sides of each ratio
 * alike, and the median over the rounds shrugs off one disturbed round. The
 * ratios hold whichever machine or Node runs it. Prints one table and the
 * targets as PASS/MISS, and writes bench/results.json.
 *
 * Exit code: 1 when a row could not be measured (a process failed, or answers
 * came back with statuses other than the row's own); a MISS alone exits 0
 * (timings on a shared machine are evidence, not a gate) unless `--strict`.
 *
 *   npm run bench:http [-- --duration 9 --rounds 3 --warmup 5 --rewarm 1 --strict --only 'task GET,models GET']
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { generatedTasks, IMAGE, MANY_TASKS, seedBenchKey } from './bench/fixture.ts';
import { pinning, root, runMain, startGemforge, startPrism, startScript, type Started } from './bench/processes.ts';
import { render, targets, type Row } from './bench/report.ts';
import { row, type Case } from './bench/rounds.ts';
import type { LoadJob } from './bench/types.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '9' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '5' },
    /** Seconds of warm-up before each later round (the server sat idle while the other side was measured). */
    rewarm: { type: 'string', default: '1' },
    strict: { type: 'boolean', default: false },
    /** Comma-separated row names to run (e.g. while profiling one path); default all. */
    only: { type: 'string' },
  },
});
const DURATION = Number(values.duration);
const ROUNDS = Math.max(1, Number(values.rounds));
const ONLY = values.only ? new Set(values.only.split(',').map((n) => n.trim())) : undefined;
const selected = (cases: Case[]) => cases.filter((c) => !ONLY || ONLY.has(c.name));
const WARMUP = Number(values.warmup);
const REWARM = Number(values.rewarm);
const OPTIONS = { duration: DURATION, rounds: ROUNDS, warmup: WARMUP, rewarm: REWARM };

const TEXT = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }], max_tokens: 16 };
const CHAT = '/api/generate/text/v1/chat/completions';

function gemforgeCases(base: string, auth: Record<string, string>, taskIds: string[], idemKey: string): Case[] {
  const taskId = taskIds[0]!;
  const get = (path: string, headers = auth) => ({ kind: 'autocannon' as const, url: base + path, method: 'GET', headers });
  const post = (path: string, body: unknown, extra: Partial<LoadJob> = {}) => ({
    kind: 'autocannon' as const,
    url: base + path,
    method: 'POST',
    headers: auth,
    body: JSON.stringify(body),
    ...extra,
  });
  return [
    { name: 'task GET', connections: 50, expect: [200], job: get(`/api/generate/tasks/${taskId}`) },
    // Concurrent reads of one task share one lookup (storage/engine/reads.ts); here every read in flight is of another task.
    {
      name: `task GET ${MANY_TASKS} tasks`,
      connections: 50,
      expect: [200],
      job: { ...get(`/api/generate/tasks/${taskId}`), paths: taskIds.map((id) => `/api/generate/tasks/${id}`) },
    },
    { name: 'task HEAD', connections: 50, expect: [200], job: { ...get(`/api/generate/tasks/${taskId}`), method: 'HEAD', kind: 'node' } },
    { name: 'models GET', connections: 50, expect: [200], job: get('/api/generate/models') },
    { name: '401 without key', connections: 50, expect: [401], job: get('/api/generate/models', {}) },
    { name: 'voices GET', connections: 50, expect: [200], job: get('/api/generate/voices') },
    { name: 'image new identity', connections: 32, expect: [202], job: post('/api/generate/image', IMAGE, { freshIdempotencyKey: true }) },
    {
      name: 'image exact replay',
      connections: 32,
      expect: [200],
      job: post('/api/generate/image', IMAGE, { headers: { ...auth, 'idempotency-key': idemKey } }),
    },
    { name: 'text completion', connections: 32, expect: [200], job: post(CHAT, TEXT, { freshIdempotencyKey: true }) },
    {
      name: 'text stream first chunk',
      connections: 32,
      expect: [200],
      job: { ...post(CHAT, { ...TEXT, stream: true }, { freshIdempotencyKey: true }), kind: 'node', firstChunk: true },
    },
  ];
}

const prismCases = (base: string, taskId: string): Case[] => {
  const headers = { authorization: 'Bearer gf_bench' };
  return [
    {
      name: 'Prism task GET',
      connections: 50,
      expect: [200],
      job: { kind: 'autocannon', url: `${base}/api/generate/tasks/${taskId}`, method: 'GET', headers },
    },
    { name: 'Prism models GET', connections: 50, expect: [200], job: { kind: 'autocannon', url: `${base}/api/generate/models`, method: 'GET', headers } },
  ];
};

const helloCase = (name: string, base: string): Case => ({
  name,
  connections: 50,
  expect: [200],
  job: { kind: 'autocannon', url: `${base}/`, method: 'GET', headers: {} },
});

/** Runs the cases against a started server (each as one row, see `row`), then stops it. */
async function against(server: Started, cases: Case[], baseline: Case): Promise<Row[]> {
  try {
    const rows: Row[] = [];
    for (const c of selected(cases)) rows.push(await row({ ...c, job: { ...c.job, serverPid: server.child.pid } }, baseline, OPTIONS));
    return rows;
  } finally {
    await server.stop();
  }
}

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-http-'));
  const logFile = path.join(dataDir, 'server.log');
  console.log(
    `Node ${process.version}; ${pinning ? `servers on core ${pinning.server}, load on core ${pinning.load}` : 'no CPU pinning (taskset or a second core missing)'}; ${ROUNDS} rounds of ${(DURATION / ROUNDS).toFixed(1)} s (baseline, row) per row, each side warmed up first (${WARMUP} s before a row's first round, ${REWARM} s before the others)`,
  );
  try {
    const secret = await seedBenchKey(dataDir);
    const auth = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
    const { taskIds, idemKey } = await generatedTasks(dataDir, logFile, auth, MANY_TASKS);
    const taskId = taskIds[0]!;

    const bare = await startScript('bare-node.ts');
    const baseline: Case = { ...helloCase('bare node:http', bare.base), job: { ...helloCase('', bare.base).job, serverPid: bare.child.pid } };
    const rows: Row[] = [];
    try {
      const expressServer = await startScript('bare-express.ts');
      rows.push(...(await against(expressServer, [helloCase('bare Express 5', expressServer.base)], baseline)));
      // Production as deployed: response validation off, info-level access log to a file.
      const env = { DATA_DIR: dataDir, NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'info', TEXT_STREAM_DELAY_MS: '0' };
      const gemforge = await startGemforge(env, logFile);
      rows.push(...(await against(gemforge, gemforgeCases(gemforge.base, auth, taskIds, idemKey), baseline)));
      const prism = await startPrism();
      rows.push(...(await against(prism, prismCases(prism.base, taskId), baseline)));
    } finally {
      await bare.stop();
    }
    const checks = targets(rows);
    console.log(`\n${render(rows, checks)}`);

    let commit = 'unknown';
    try {
      commit = execSync('git rev-parse --short HEAD', { cwd: root, encoding: 'utf8' }).trim();
    } catch {
      /* not a git checkout */
    }
    const out = path.join(root, 'bench', 'results.json');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const summary = {
      node: process.version,
      commit,
      date: new Date().toISOString(),
      cpus: os.availableParallelism(),
      pinning: pinning ?? null,
      durationSeconds: DURATION,
      rounds: ROUNDS,
      warmupSeconds: WARMUP,
      rewarmSeconds: REWARM,
      rows,
      targets: checks,
    };
    fs.writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`\nwrote ${path.relative(root, out)}`);

    const broken = rows.filter((r) => r.problem);
    const missed = checks.filter((t) => !t.pass);
    if (broken.length) console.log(`bench-http: FAIL (${broken.length} row(s) not measured)`);
    else
      console.log(
        `bench-http: ${missed.length ? `${missed.length} target(s) missed${values.strict ? '' : ' (not a failure without --strict)'}` : 'every target holds'}`,
      );
    return broken.length || (values.strict && missed.length) ? 1 : 0;
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runMain(main);
