/**
 * `npm run bench:fairshare` (also part of `npm run bench`): fair share of the media queue and
 * the cost of admission, on the embedded SQLite (NODE_ENV=production). Rows:
 *
 *   flood             account A queues 2,000 image tasks, then account B submits
 *                     one; B's wait until its task is `processing` and until it
 *                     `succeeded`, against one job's duration. The local image
 *                     generator is given a fixed duration by the scenario card
 *                     `[[scenario:processing:S]]` (every task, B's too), with
 *                     WORKER_CONCURRENCY=2. Target: B is processing within 2 job
 *                     durations (before fair share it waited for A's whole backlog:
 *                     2,000 × S / 2 seconds, printed beside it).
 *   claim 1k / 100k   the worker's claim (storage/jobs.ts claimNext, caps on) with
 *                     1,000 and then 100,000 jobs queued over 1,000 accounts: µs per
 *                     claim, median of 500. Target: 100k ≤ 1.5 × 1k (the claim reads
 *                     a few index entries, never the backlog). On SQLite, and also on
 *                     Postgres when BENCH_DATABASE_URL or TEST_DATABASE_URL names a
 *                     server (a database is made for the run and dropped), e.g.
 *                     `scripts/ci-postgres.sh npm run bench:fairshare -- --only claim`.
 *   image submission  new image identities (autocannon, 32 connections, worker off)
 *                     with admission on (rates and queued-task cap checked, never
 *                     reached) against admission off, measured in alternating
 *                     rounds: the ratio of requests/s and of server CPU per request.
 *                     Target: ≥ 0.90 (admission costs at most a tenth of a submission).
 *
 * Timings on a shared machine are evidence, not a gate: a MISS exits 0 unless
 * `--strict`; a row that could not be measured exits 1.
 *
 *   npm run bench:fairshare [-- --flood 2000 --job-seconds 0.5 --duration 9 --rounds 3 --strict --only flood,claim,submission]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isSqlite, openDb, type Db } from '../server/storage/db.ts';
import * as jobs from '../server/storage/jobs.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';
import { benchDatabase, IMAGE, seedBenchKey } from './bench/fixture.ts';
import { runMain, startGemforge } from './bench/processes.ts';
import { row, type Case } from './bench/rounds.ts';

const { values } = parseArgs({
  options: {
    flood: { type: 'string', default: '2000' },
    'job-seconds': { type: 'string', default: '0.5' },
    duration: { type: 'string', default: '9' },
    rounds: { type: 'string', default: '3' },
    strict: { type: 'boolean', default: false },
    /** Comma-separated rows to run: flood, claim, submission; default all. */
    only: { type: 'string' },
  },
});
const ONLY = values.only ? new Set(values.only.split(',').map((n) => n.trim())) : undefined;
const FLOOD = Number(values.flood);
const JOB_SECONDS = Number(values['job-seconds']);
const OPTIONS = { duration: Number(values.duration), rounds: Math.max(1, Number(values.rounds)), warmup: 3, rewarm: 1 };

interface Result {
  name: string;
  figures: string;
  target: string;
  pass: boolean | undefined;
  problem?: string;
}

/** `dir` made (with its parents) and returned. */
const made = (dir: string) => (fs.mkdirSync(dir, { recursive: true }), dir);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(base: string, secret: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/api/generate/image`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** A submits FLOOD tasks (16 at a time), then B one; B's task is polled until it ends. */
async function flood(dir: string, logFile: string): Promise<Result> {
  const [a, b] = [await seedBenchKey(dir), await seedBenchKey(dir)];
  const server = await startGemforge({ DATA_DIR: dir, NODE_ENV: 'production', LOG_LEVEL: 'warn', WORKER_CONCURRENCY: '2', WORKER_POLL_MS: '20' }, logFile);
  try {
    const body = { model: 'gemforge-image-1', prompt: `a fox [[scenario:processing:${JOB_SECONDS}]]`, parameters: { resolution: '512', outputCount: 1 } };
    let sent = 0;
    const floodStart = Date.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (sent < FLOOD) {
          sent++;
          const r = await post(server.base, a, body);
          if (r.status !== 202) throw new Error(`A's submission answered ${r.status}: ${JSON.stringify(r.body)}`);
        }
      }),
    );
    const floodSeconds = (Date.now() - floodStart) / 1000;
    const submitted = Date.now();
    const mine = await post(server.base, b, body);
    if (mine.status !== 202) throw new Error(`B's submission answered ${mine.status}`);
    let processingAt: number | undefined;
    let endedAt: number | undefined;
    let status = '';
    while (!endedAt) {
      const res = await fetch(`${server.base}/api/generate/tasks/${mine.body.task.id}`, { headers: { authorization: `Bearer ${b}` } });
      status = ((await res.json()) as { task: { status: string } }).task.status;
      if (status !== 'queued') processingAt ??= Date.now();
      if (['succeeded', 'partial', 'failed', 'cancelled'].includes(status)) endedAt = Date.now();
      else if (Date.now() - submitted > 10 * 60_000) throw new Error('B waited more than 10 minutes');
      else await sleep(20);
    }
    const toProcessing = (processingAt! - submitted) / 1000;
    const toEnd = (endedAt - submitted) / 1000;
    const duration = (endedAt - processingAt!) / 1000;
    const fifo = (FLOOD * JOB_SECONDS) / 2;
    return {
      name: `flood: A ${FLOOD} tasks, then B 1`,
      figures: `A queued in ${floodSeconds.toFixed(1)} s; B processing after ${toProcessing.toFixed(2)} s, ${status} after ${toEnd.toFixed(2)} s; one job ${duration.toFixed(2)} s (first-come order: ~${fifo.toFixed(0)} s)`,
      target: `B processing ≤ 2 job durations (${(2 * duration).toFixed(2)} s)`,
      pass: status === 'succeeded' && toProcessing <= 2 * Math.max(duration, JOB_SECONDS),
    };
  } finally {
    await server.stop();
  }
}

/** 1,000 accounts, each with a key and one reservation its tasks name. */
async function queueAccounts(db: Db, n: number): Promise<Array<{ accountId: string; keyId: string; reservationId: string }>> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const account = await accounts.createAccount(db, systemClock, { name: `fair-${i}` });
    await ledger.credit(db, systemClock, account.id, 1_000_000, 'bench grant');
    const { key } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'k', scopes: ['generate'] });
    const r = await ledger.reserve(db, systemClock, { accountId: account.id, keyId: key.id, purpose: 'media', amount: 1 });
    out.push({ accountId: account.id, keyId: key.id, reservationId: r.id });
  }
  return out;
}

/** Queues `count` more jobs spread round-robin over `owners` (bulk rows: this measures the claim, not submission). */
async function queueJobs(db: Db, owners: Awaited<ReturnType<typeof queueAccounts>>, from: number, count: number): Promise<void> {
  const now = new Date().toISOString();
  await db.transaction(async (trx) => {
    for (let start = from; start < from + count; start += 500) {
      const ids = Array.from({ length: Math.min(500, from + count - start) }, (_, i) => start + i);
      const tasks = ids.map((i) => {
        const o = owners[i % owners.length]!;
        return {
          id: `task_bench${i}`,
          account_id: o.accountId,
          key_id: o.keyId,
          kind: 'image',
          model: 'm',
          request: '{}',
          status: 'queued',
          reservation_id: o.reservationId,
          created_at: now,
          updated_at: now,
        };
      });
      for (let i = 0; i < tasks.length; i += 100) {
        const chunk = tasks.slice(i, i + 100);
        await trx('tasks').insert(chunk);
        await trx('jobs').insert(
          chunk.map((t) => ({
            task_id: t.id,
            account_id: t.account_id,
            state: 'queued',
            attempts: 0,
            run_at: now,
            created_at: now,
            updated_at: now,
            lane: 'local',
          })),
        );
      }
    }
  });
}

/** µs per claim, the median of `n` claims, each job finished after (untimed) so caps never bind. */
async function claimMicros(db: Db, n: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const job = await jobs.claimNext(db, 'bench', jobs.DATABASE_CLOCK, 'local', { local: 2, remote: 16 });
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
    if (!job) throw new Error('the queue ran dry');
    await jobs.finish(db, job.id, 'bench', new Date().toISOString());
  }
  times.sort((x, y) => x - y);
  return times[times.length >> 1]!;
}

async function claimCost(dir: string, databaseUrl?: string): Promise<Result> {
  const db = await openDb({ dataDir: dir, databaseUrl });
  try {
    const owners = await queueAccounts(db, 1000);
    // After each bulk load, SQLite folds the WAL into the database and Postgres gathers the statistics autovacuum
    // would: the claims are measured, not the aftermath of the load.
    const settle = () => db.raw(isSqlite(db) ? 'PRAGMA wal_checkpoint(TRUNCATE)' : 'ANALYZE');
    await queueJobs(db, owners, 0, 1000);
    await settle();
    await claimMicros(db, 100); // warm-up
    const small = await claimMicros(db, 500);
    await queueJobs(db, owners, 1000, 99_000);
    await settle();
    await claimMicros(db, 100);
    const large = await claimMicros(db, 500);
    return {
      name: `claim at 1k vs 100k queued jobs, 1,000 accounts (${isSqlite(db) ? 'SQLite' : 'Postgres'})`,
      figures: `${small.toFixed(0)} µs vs ${large.toFixed(0)} µs per claim (×${(large / small).toFixed(2)})`,
      target: '100k ≤ 1.5 × 1k',
      pass: large <= 1.5 * small,
    };
  } finally {
    await db.destroy();
  }
}

async function submissionCost(root: string, logFile: string): Promise<Result> {
  const dirs = ['on', 'off'].map((n) => made(path.join(root, n)));
  const secrets = [await seedBenchKey(dirs[0]!), await seedBenchKey(dirs[1]!)];
  const common = { NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'info' };
  const off = { KEY_MEDIA_RATE: '0', KEY_TEXT_RATE: '0', ACCOUNT_MEDIA_RATE: '0', ACCOUNT_TEXT_RATE: '0', ACCOUNT_QUEUED_TASKS: '0' };
  const on = await startGemforge({ ...common, DATA_DIR: dirs[0]! }, logFile); // limits checked, never reached (processes.ts)
  const bare = await startGemforge({ ...common, ...off, DATA_DIR: dirs[1]! }, logFile);
  try {
    const job = (base: string, secret: string, pid: number | undefined): Case['job'] => ({
      kind: 'autocannon',
      url: `${base}/api/generate/image`,
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify(IMAGE),
      freshIdempotencyKey: true,
      ...(pid && { serverPid: pid }),
    });
    const baseline: Case = { name: 'image submission, admission off', connections: 32, expect: [202], job: job(bare.base, secrets[1]!, bare.child.pid) };
    const measured = await row(
      { name: 'image submission, admission on', connections: 32, expect: [202], job: job(on.base, secrets[0]!, on.child.pid) },
      baseline,
      OPTIONS,
    );
    const cpu = measured.cpuRatio === undefined ? '' : `; server CPU ${measured.cpuUs?.toFixed(0)} µs per submission, off/on ×${measured.cpuRatio.toFixed(2)}`;
    return {
      name: 'image submission: admission on vs off',
      figures: `${measured.rps.toFixed(0)} vs ${measured.baselineRps?.toFixed(0)} req/s (×${measured.ratio?.toFixed(2)})${cpu}`,
      target: 'on ≥ 0.90 × off',
      pass: measured.problem ? undefined : (measured.ratio ?? 0) >= 0.9,
      ...(measured.problem && { problem: measured.problem }),
    };
  } finally {
    await on.stop();
    await bare.stop();
  }
}

async function main(): Promise<number> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-fair-'));
  const logFile = path.join(root, 'server.log');
  const results: Result[] = [];
  const attempt = async (name: string, run: () => Promise<Result>) => {
    if (ONLY && !ONLY.has(name)) return;
    try {
      results.push(await run());
    } catch (error) {
      results.push({ name, figures: '', target: '', pass: undefined, problem: (error as Error).message });
    }
    const r = results.at(-1)!;
    console.log(`${r.problem ? 'FAIL' : r.pass ? 'PASS' : 'MISS'}  ${r.name}: ${r.problem ?? `${r.figures}; target ${r.target}`}`);
  };
  try {
    await attempt('flood', () => flood(made(path.join(root, 'flood')), logFile));
    await attempt('claim', () => claimCost(made(path.join(root, 'claim'))));
    const pgUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
    if (pgUrl) {
      await attempt('claim', async () => {
        const pg = await benchDatabase(pgUrl);
        try {
          return await claimCost(made(path.join(root, 'claim-pg')), pg.url);
        } finally {
          await pg.drop();
        }
      });
    }
    await attempt('submission', () => submissionCost(path.join(root, 'submit'), logFile));
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  const broken = results.filter((r) => r.problem).length;
  const missed = results.filter((r) => r.pass === false).length;
  console.log(
    `bench-fairshare: ${broken ? `FAIL (${broken} row(s) not measured)` : missed ? `${missed} target(s) missed${values.strict ? '' : ' (not a failure without --strict)'}` : 'every target holds'}`,
  );
  return broken || (values.strict && missed) ? 1 : 0;
}

runMain(main);
