/**
 * Two checkouts' task reads side by side in one run: both servers up at once
 * (each started from its own tree, compiled, as `profile-http.ts` starts one),
 * short bursts of reads of one task alternating between them (A B, B A, …, since
 * whichever is measured second in a round reads higher on a loaded machine), the
 * server's CPU per read from /proc per burst; then each tree's median and the
 * geometric mean of the ratios second/first. For a machine too loaded for
 * `bench:http`'s absolute figures. Each checkout needs its node_modules (e.g.
 * `git worktree add --detach /tmp/base main` and a symlink).
 *
 *   node --import tsx scripts/task-read-ab.ts BASE_DIR NEW_DIR [--rounds 12 --amount 8000 --connections 50]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { startGemforge, type Started } from './bench/processes.ts';
import { generatedTasks, seedBenchKey } from './bench/fixture.ts';
import { cpuSeconds } from './bench/cpu.ts';
import { quantile } from './bench/quantile.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '12' },
    amount: { type: 'string', default: '8000' },
    connections: { type: 'string', default: '50' },
  },
});

interface Tree {
  name: string;
  server: Started;
  url: string;
  headers: Record<string, string>;
  perRead: number[];
}

/** A server from `tree` on its own data dir, with one generated task to read. */
async function start(tree: string, dataDir: string): Promise<Tree> {
  const logFile = path.join(dataDir, 'server.log');
  const secret = await seedBenchKey(dataDir);
  const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const { taskIds } = await generatedTasks(dataDir, logFile, headers, 1);
  const env = { DATA_DIR: dataDir, NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'info' };
  const server = await startGemforge(env, logFile, undefined, path.resolve(tree));
  return { name: path.basename(tree), server, url: `${server.base}/api/generate/tasks/${taskIds[0]}`, headers, perRead: [] };
}

/** `amount` reads; the server's CPU per read in µs. */
async function burst(t: Tree, amount: number): Promise<number> {
  const before = cpuSeconds(t.server.child.pid) ?? NaN;
  const r = (await autocannon({ url: t.url, headers: t.headers, connections: Number(values.connections), amount } as never)) as unknown as {
    statusCodeStats: Record<string, { count: number }>;
  };
  const after = cpuSeconds(t.server.child.pid) ?? NaN;
  if (Object.keys(r.statusCodeStats).join() !== '200') throw new Error(`${t.name} answered ${JSON.stringify(r.statusCodeStats)}`);
  return ((after - before) * 1e6) / amount;
}

async function main(): Promise<void> {
  if (positionals.length !== 2) throw new Error('usage: task-read-ab.ts BASE_DIR NEW_DIR');
  const dirs = positionals.map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-task-ab-')));
  const trees: Tree[] = [];
  try {
    for (const [i, tree] of positionals.entries()) trees.push(await start(tree, dirs[i]!));
    for (const t of trees) await burst(t, 10_000); // warm-up
    const ratios: number[] = [];
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const t of round % 2 === 0 ? trees : [...trees].reverse()) t.perRead.push(await burst(t, Number(values.amount)));
      const [a, b] = trees.map((t) => t.perRead.at(-1)!);
      ratios.push(b / a);
      const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
      console.log(
        `round ${round + 1} (load ${load}): ${trees.map((t) => `${t.name} ${t.perRead.at(-1)!.toFixed(0)}`).join(', ')} µs per read, ratio ${(b / a).toFixed(2)}`,
      );
    }
    const geomean = Math.exp(ratios.reduce((s, r) => s + Math.log(r), 0) / ratios.length);
    const medians = trees
      .map(
        (t) =>
          `${t.name} ${quantile(
            [...t.perRead].sort((x, y) => x - y),
            0.5,
          ).toFixed(0)}`,
      )
      .join(', ');
    console.log(`medians: ${medians} µs per read; geometric mean of the ratios ${geomean.toFixed(3)}`);
  } finally {
    for (const t of trees) await t.server.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

await main();
