/**
 * Shows that asset uploads are streamed, not buffered: starts the real server
 * as a child process (as `npm start` runs it, bench/processes.ts `serverArgs`; temp DATA_DIR), sends
 * 20 concurrent uploads of exactly 30 MiB (a valid WAV), samples the server's
 * resident memory from /proc/<pid>/status every 25 ms and prints peak versus
 * baseline. Buffering the bodies would add about 20 × 30 MiB = 600 MiB; the
 * budget for the rise is 150 MiB (exit code 1 beyond it). Then hostile images
 * (each built to cost the server memory), 10 at once each, on the fresh server before the honest uploads: a
 * decompression bomb, refused from its header (target: peak RSS < 300 MiB), and
 * a PNG and a progressive JPEG at the pixel limit, decoded behind the decode
 * gate (target: a rise < 200 MiB; the gate admits 160 MiB of decoding at once).
 *
 *   npm run bench:uploads [-- --uploads 20 --budget-mib 150]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { openDb } from '../server/storage/db.ts';
import * as accounts from '../server/domain/accounts.ts';
import { systemClock } from '../server/domain/clock.ts';
import { MAX_ASSET_BYTES } from '../server/domain/assets.ts';
import { freePort, runMain, serverArgs, waitFor } from './bench/processes.ts';
import { quantile } from './bench/quantile.ts';
import { pngBomb } from '../test/helpers/media.ts';

/** Hostile uploads sent at once, as an attacker would. */
const HOSTILE_UPLOADS = 10;

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
  const child = spawn(process.execPath, serverArgs(), {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(`${base}/api/generate/models`, 200, { headers: { authorization: `Bearer ${secret}` } });
    // Hostile images first, on a fresh server: the honest phase leaves its heap grown.
    const hostile = [];
    for (const row of await hostileRows()) hostile.push(await hostileUploads(base, secret, child.pid!, row));

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
    console.log(
      `server RSS: baseline ${mib(baseline)} MiB, peak ${mib(peak)} MiB, rise ${mib(rise)} MiB (budget ${BUDGET_MIB} MiB; buffering would add ~${totalMib} MiB)`,
    );
    const honest = ok === UPLOADS && rise / 1024 <= BUDGET_MIB;
    console.log(honest ? 'honest uploads: PASS (memory stays flat while streaming)' : 'honest uploads: FAIL');

    const pass = honest && hostile.every(Boolean);
    console.log(pass ? 'bench-uploads: PASS' : 'bench-uploads: FAIL');
    return pass ? 0 : 1;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

interface HostileRow {
  name: string;
  bytes: Buffer;
  type: string;
  /** The status every upload of it must get. */
  status: number;
  /** The bound: the server's peak resident memory, or its rise over the baseline, in MiB. */
  target: { peakMib: number } | { riseMib: number };
}

/**
 * Images that cost a server memory to decode: a decompression bomb
 * (about 1 MB declaring 16000×16000 RGBA: 1 GB decoded) must be refused from its
 * header; an image at the pixel limit (8000×5000 RGBA, ~100 KB of zeros) is
 * decoded, a few lines at a time, behind the decode gate.
 */
async function hostileRows(): Promise<HostileRow[]> {
  const create = { width: 8000, height: 5000, channels: 4 as const, background: { r: 0, g: 0, b: 0, alpha: 1 } };
  return [
    { name: 'decompression bomb 16000x16000', bytes: fs.readFileSync(await pngBomb()), type: 'image/png', status: 422, target: { peakMib: 300 } },
    // Decoded for real: the decode gate lets at most 160 MiB of decoding run at once.
    {
      name: 'PNG at the pixel limit 8000x5000',
      bytes: await sharp({ create }).png({ compressionLevel: 9 }).toBuffer(),
      type: 'image/png',
      status: 201,
      target: { riseMib: 200 },
    },
    {
      name: 'progressive JPEG at the pixel limit 8000x5000',
      bytes: await sharp({ create: { ...create, channels: 3 as const } })
        .jpeg({ progressive: true })
        .toBuffer(),
      type: 'image/jpeg',
      status: 201,
      target: { riseMib: 200 },
    },
  ];
}

/** 10 (HOSTILE_UPLOADS) concurrent uploads of one hostile image: the server's peak RSS against the row's target, and time to answer. */
async function hostileUploads(base: string, secret: string, pid: number, row: HostileRow): Promise<boolean> {
  const send = async () => {
    const started = performance.now();
    const res = await fetch(`${base}/api/generate/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': row.type },
      body: new Uint8Array(row.bytes),
    });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  };
  await send(); // warm-up
  await new Promise((r) => setTimeout(r, 500));
  const baseline = rssKib(pid);
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, rssKib(pid))), 10);
  const answers = await Promise.all(Array.from({ length: HOSTILE_UPLOADS }, send));
  clearInterval(sampler);
  peak = Math.max(peak, rssKib(pid));
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  const expected = answers.filter((a) => a.status === row.status).length;
  const within = 'peakMib' in row.target ? peak / 1024 < row.target.peakMib : (peak - baseline) / 1024 < row.target.riseMib;
  const target = 'peakMib' in row.target ? `peak < ${row.target.peakMib} MiB` : `rise < ${row.target.riseMib} MiB`;
  const pass = expected === HOSTILE_UPLOADS && within;
  console.log(
    `${row.name} (${(row.bytes.length / 1024).toFixed(0)} KiB) x${HOSTILE_UPLOADS} at once: ${expected}/${HOSTILE_UPLOADS} answered ${row.status}, ` +
      `median ${quantile(ms, 0.5).toFixed(0)} ms, slowest ${ms[ms.length - 1]!.toFixed(0)} ms; server RSS peak ${mib(peak)} MiB, ` +
      `rise ${mib(peak - baseline)} MiB (target: ${target}) ${pass ? 'PASS' : 'FAIL'}`,
  );
  return pass;
}

runMain(main);
