/**
 * Shows that console sign-ins do not stall the server: starts the real server as
 * a child process (temp DATA_DIR), measures /healthz one request after another
 * while idle, then while bursts of 24 concurrent sign-ins (each an argon2id
 * check, ~190 ms of CPU) are in flight, and prints both. With the hashing on the
 * event loop /healthz went from 2–3 ms to 550–760 ms under such a burst; on the
 * worker-thread pool (server/domain/password-pool.ts) it must stay under the
 * budget (default 150 ms at the slowest; exit code 1 beyond it).
 *
 *   node --import tsx scripts/bench-signin.ts [--signins 24 --rounds 3 --budget-ms 150]   (npm run bench runs it with the others)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runMain, startGemforge } from './bench/processes.ts';
import { quantile } from './bench/quantile.ts';

const { values } = parseArgs({
  options: { signins: { type: 'string', default: '24' }, rounds: { type: 'string', default: '3' }, 'budget-ms': { type: 'string', default: '150' } },
});
const SIGNINS = Number(values.signins);
const ROUNDS = Number(values.rounds);
const BUDGET_MS = Number(values['budget-ms']);

/** One /healthz round trip in ms. */
async function healthMs(base: string): Promise<number> {
  const start = performance.now();
  const res = await fetch(`${base}/healthz`);
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
  return performance.now() - start;
}

/** A burst of wrong-password sign-ins for unknown emails, each from an address of its own (no limit refuses one before its check). */
function burst(base: string, round: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: SIGNINS }, async (_, i) => {
      const res = await fetch(`${base}/console/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `198.18.${round}.${i + 1}` },
        body: JSON.stringify({ email: `bench-${round}-${i}@example.com`, password: 'not the password' }),
      });
      await res.arrayBuffer();
      return res.status;
    }),
  );
}

const fmt = (ms: number) => ms.toFixed(1).padStart(7);

async function main(): Promise<number> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-signin-'));
  const server = await startGemforge(
    { DATA_DIR: dataDir, LOG_LEVEL: 'warn', NODE_ENV: 'production', TRUST_PROXY: 'loopback' },
    path.join(dataDir, 'server.log'),
  );
  try {
    // Warm-up, not measured: the console's API (its validator) is built at its first request.
    await burst(server.base, 0);
    for (let i = 0; i < 20; i++) await healthMs(server.base);
    const idle: number[] = [];
    for (let i = 0; i < 20; i++) idle.push(await healthMs(server.base));
    const busy: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      let finished = false;
      const signIns = burst(server.base, round).finally(() => (finished = true));
      while (!finished) busy.push(await healthMs(server.base));
      const statuses = await signIns;
      if (statuses.some((s) => s !== 401)) throw new Error(`sign-ins answered ${[...new Set(statuses)].join(', ')}, expected 401`);
    }
    idle.sort((a, b) => a - b);
    busy.sort((a, b) => a - b);
    console.log(`/healthz while idle:                        p50 ${fmt(quantile(idle, 0.5))} ms   max ${fmt(idle.at(-1)!)} ms`);
    console.log(
      `/healthz under ${SIGNINS} concurrent sign-ins (${ROUNDS}×): p50 ${fmt(quantile(busy, 0.5))} ms   max ${fmt(busy.at(-1)!)} ms   (${busy.length} probes; budget ${BUDGET_MS} ms)`,
    );
    return busy.at(-1)! <= BUDGET_MS ? 0 : 1;
  } finally {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runMain(main);
