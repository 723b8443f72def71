/**
 * Shows that asset uploads are streamed, not buffered: starts the real server
 * as a child process (`node --import tsx server/main.ts`, temp DATA_DIR), sends
 * 20 concurrent uploads of exactly 30 MiB (a valid WAV), samples the server's
 * resident memory from /proc/<pid>/status every 25 ms and prints peak versus
 * baseline. Buffering the bodies would add about 20 × 30 MiB = 600 MiB; the
 * budget for the rise is 150 MiB (exit code 1 beyond it).
 *
 *   npm run bench:uploads [-- --uploads 20 --budget-mib 150]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openDb } from '../server/storage/db.ts';
import { freePort } from './lib/net.ts';
import * as accounts from '../server/domain/accounts.ts';
import { systemClock } from '../server/domain/clock.ts';
import { MAX_ASSET_BYTES } from '../server/domain/assets.ts';

const { values } = parseArgs({
  options: { uploads: { type: 'string', default: '20' }, 'budget-mib': { type: 'string', default: '150' } },
});
const UPLOADS = Number(values.uploads);
const BUDGET_MIB = Number(values['budget-mib']);
const root = path.resolve(import.meta.dirname, '..');

/** Resident set size of a process in KiB (Linux /proc). */
function rssKib(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
}

/** A valid 16-bit mono 16 kHz WAV of exactly `total` bytes (silence). */
function wavOfSize(total: number): Buffer {
  const b = Buffer.alloc(total);
  b.write('RIFF', 0, 'latin1');
  b.writeUInt32LE(total - 8, 4);
  b.write('WAVEfmt ', 8, 'latin1');
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(16_000, 24);
  b.writeUInt32LE(32_000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36, 'latin1');
  b.writeUInt32LE(total - 44, 40);
  return b;
}

const mib = (kib: number) => (kib / 1024).toFixed(1);

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-uploads-'));
  const db = await openDb({ dataDir });
  const account = await accounts.createAccount(db, systemClock, { name: 'bench' });
  const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'bench', scopes: ['read', 'generate'] });
  await db.destroy();

  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${base}/api/generate/models`, { headers: { authorization: `Bearer ${secret}` } })).ok) break;
      } catch {
        /* not listening yet */
      }
      if (i > 200) throw new Error('server did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
    const body = wavOfSize(MAX_ASSET_BYTES) as Uint8Array<ArrayBuffer>;
    const upload = () =>
      fetch(`${base}/api/generate/assets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'audio/wav', 'x-filename': 'bench.wav' },
        body,
      }).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      });

    // Warm up every code path once (ffprobe, sqlite, validator), then let the heap settle.
    await upload();
    await new Promise((r) => setTimeout(r, 500));
    const baseline = rssKib(child.pid!);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssKib(child.pid!));
    }, 25);
    const started = Date.now();
    const statuses = await Promise.all(Array.from({ length: UPLOADS }, upload));
    const seconds = (Date.now() - started) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, rssKib(child.pid!));

    const ok = statuses.filter((s) => s === 201).length;
    const rise = peak - baseline;
    const totalMib = (UPLOADS * MAX_ASSET_BYTES) / 1024 / 1024;
    console.log(`uploads: ${ok}/${UPLOADS} answered 201 (${totalMib} MiB in ${seconds.toFixed(1)} s, ${(totalMib / seconds).toFixed(0)} MiB/s)`);
    console.log(`server RSS: baseline ${mib(baseline)} MiB, peak ${mib(peak)} MiB, rise ${mib(rise)} MiB (budget ${BUDGET_MIB} MiB; buffering would add ~${totalMib} MiB)`);
    const pass = ok === UPLOADS && rise / 1024 <= BUDGET_MIB;
    console.log(pass ? 'bench-uploads: PASS (memory stays flat while streaming)' : 'bench-uploads: FAIL');
    return pass ? 0 : 1;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
