/**
 * An idle server's resident memory: starts the server as bench:uploads does
 * (`node` with SERVER_ARGS, NODE_ENV=production, LOG_LEVEL=warn, a
 * temp DATA_DIR with one account and key), waits until it answers, makes the
 * bench's first request (GET /api/generate/models with the key), lets it settle
 * and reads VmRSS, RssAnon and RssFile from /proc/<pid>/status. The bomb row of
 * bench:uploads is this figure plus < 1 MiB, so this is the number to bisect.
 *
 * `--root` measures another checkout (a `git worktree add` of an older commit):
 * its own code seeds the data dir (its migrations) and runs the server, with
 * this checkout's flags unless `--node-defaults` (V8's own young generation, as
 * commits before server/node-flags.ts ran). `--heap` adds V8's figures, read
 * inside the server: RSS counts only written pages, heapTotal the reserved ones.
 *
 *   npx node --import tsx scripts/idle-rss.ts [--root DIR] [--runs 2] [--settle-ms 3000] [--heap] [--node-defaults] [--smaps DIR]
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, runMain, waitFor } from './bench/processes.ts';
import { SERVER_NODE_FLAGS } from '../server/node-flags.ts';

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: path.resolve(import.meta.dirname, '..') },
    runs: { type: 'string', default: '2' },
    'settle-ms': { type: 'string', default: '3000' },
    /** Also print V8's view (process.memoryUsage, heap spaces), read inside the server through a preload. */
    heap: { type: 'boolean', default: false },
    /** Copy each run's /proc/<pid>/smaps into this directory (which mappings hold the memory). */
    smaps: { type: 'string' },
    'node-defaults': { type: 'boolean', default: false },
  },
});
const root = path.resolve(values.root);

/** The /proc/<pid>/status fields that say where resident memory is, in KiB. */
function memoryKib(pid: number): Record<'VmRSS' | 'RssAnon' | 'RssFile', number> {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN);
  return { VmRSS: field('VmRSS'), RssAnon: field('RssAnon'), RssFile: field('RssFile') };
}

/**
 * One account and key made by the measured checkout's own code: an older
 * commit's server refuses a database migrated by newer code.
 */
function seed(dataDir: string): string {
  const code = `
    const { openDb } = await import(${JSON.stringify(path.join(root, 'server/storage/db.ts'))});
    const accounts = await import(${JSON.stringify(path.join(root, 'server/domain/accounts.ts'))});
    const { systemClock } = await import(${JSON.stringify(path.join(root, 'server/domain/clock.ts'))});
    const db = await openDb({ dataDir: ${JSON.stringify(dataDir)} });
    const account = await accounts.createAccount(db, systemClock, { name: 'idle' });
    const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'idle', scopes: ['read', 'generate'] });
    await db.destroy();
    process.stdout.write(secret);`;
  const done = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: root, encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`seeding failed: ${done.stderr}`);
  return done.stdout.trim();
}

async function measureOnce(settleMs: number): Promise<Record<string, number>> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-idle-rss-'));
  const secret = seed(dataDir);
  const port = await freePort();
  const report = path.join(dataDir, 'memory.json');
  const preload = values.heap ? ['--import', path.join(import.meta.dirname, 'bench/report-memory.mjs')] : [];
  const flags = values['node-defaults'] ? [] : SERVER_NODE_FLAGS;
  const child = spawn(process.execPath, [...flags, ...preload, '--import', 'tsx', 'server/main.ts'], {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production', MEMORY_REPORT: report },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitFor(`${base}/api/generate/models`, 200, { headers: { authorization: `Bearer ${secret}` } });
    await new Promise((r) => setTimeout(r, settleMs));
    const kib = memoryKib(child.pid!);
    if (values.smaps) fs.writeFileSync(path.join(values.smaps, `smaps-${path.basename(root)}-${Date.now()}`), fs.readFileSync(`/proc/${child.pid}/smaps`)); // copyFileSync copies nothing from /proc
    if (values.heap) {
      child.kill('SIGUSR2');
      for (let i = 0; i < 50 && !fs.existsSync(report); i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 50));
      console.log(heapSummary(JSON.parse(fs.readFileSync(report, 'utf8')) as MemoryReport));
    }
    return kib;
  } finally {
    child.kill('SIGTERM');
    await exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

interface MemoryReport {
  usage: NodeJS.MemoryUsage;
  spaces: Record<string, { size: number; used: number; physical: number }>;
}

/** One line of V8's figures in MiB: heapTotal/heapUsed/external, then each heap space's size/used. */
function heapSummary(r: MemoryReport): string {
  const m = (b: number) => (b / 1024 / 1024).toFixed(1);
  const spaces = Object.entries(r.spaces)
    .filter(([, s]) => s.size > 1024 * 1024)
    .map(([name, s]) => `${name.replace(/_space$/, '')} ${m(s.size)}/${m(s.used)}`);
  return `  heapTotal ${m(r.usage.heapTotal)} heapUsed ${m(r.usage.heapUsed)} external ${m(r.usage.external)} arrayBuffers ${m(r.usage.arrayBuffers)} MiB; spaces (size/used) ${spaces.join(', ')}`;
}

async function main(): Promise<number> {
  const mib = (kib: number) => (kib / 1024).toFixed(1);
  for (let run = 1; run <= Number(values.runs); run++) {
    const m = await measureOnce(Number(values['settle-ms']));
    console.log(`${root} run ${run}: VmRSS ${mib(m.VmRSS)} MiB, RssAnon ${mib(m.RssAnon)} MiB, RssFile ${mib(m.RssFile)} MiB`);
  }
  return 0;
}

runMain(main);
