/**
 * Image submissions of one account on Postgres at two checkouts side by side, in one run: what a change to the
 * Postgres submission path did, on a machine too loaded for `bench:postgres`'s absolute figures. Each checkout (a
 * directory with the repository and its node_modules, e.g. `git worktree add --detach ../base main` and a symlinked
 * node_modules) seeds its own fresh database on the one Postgres server given (a role with CREATEDB) with its own
 * migrations, runs its own compiled server (bench/processes.ts `startGemforge`) and is loaded with 32 connections of
 * new identities (as `bench:postgres`'s one-account row); then the same checkout on SQLite, for the ratio
 * `bench:postgres` judges. The rounds alternate which checkout goes first. Per run: req/s, p99, the server's CPU per
 * submission (all its threads, bench/load.ts) and, on Postgres, the CPU of that database's backends per submission
 * (from /proc: Linux only; the Postgres server must run on this machine).
 *
 *   node --import tsx scripts/pg-submit-ab.ts BASE_DIR NEW_DIR postgres://role@host:port/postgres [--rounds 3 --duration 8]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runMain } from './bench/processes.ts';
import type { LoadResult } from './bench/types.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '3' }, duration: { type: 'string', default: '8' } },
});
const [baseDir, newDir, maintenance] = positionals;
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.duration);
/** Linux's clock ticks per second in /proc/<pid>/stat. */
const TICKS = 100;

/** The CPU seconds so far of the backends connected to `database` (process titles `postgres: <role> <database> …`). */
function backendsCpu(database: string): number {
  let total = 0;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (/^postgres: \S+ (\S+) /.exec(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'))?.[1] !== database) continue;
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += Number(fields[11]) + Number(fields[12]); // utime, stime
    } catch {
      // the backend ended meanwhile
    }
  }
  return total / TICKS;
}

interface Tree {
  fixture: typeof import('./bench/fixture.ts');
  processes: typeof import('./bench/processes.ts');
}

/** One run of one checkout on one database (Postgres when `maintenanceUrl` is given). */
async function run(dir: string, tree: Tree, maintenanceUrl: string | undefined) {
  const { fixture, processes } = tree;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-pg-ab-'));
  const db = maintenanceUrl ? await fixture.benchDatabase(maintenanceUrl) : undefined;
  try {
    const secret = await fixture.seedBenchKey(dataDir, db?.url);
    const env = { DATA_DIR: dataDir, NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'info', ...(db && { DATABASE_URL: db.url }) };
    const server = await processes.startGemforge(env, path.join(dataDir, 'server.log'), processes.pinning?.server, dir);
    try {
      const job = {
        kind: 'autocannon',
        url: `${server.base}/api/generate/image`,
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify(fixture.IMAGE),
        freshIdempotencyKey: true,
        connections: 32,
        serverPid: server.child.pid,
      };
      await processes.runLoad({ ...job, warmupSeconds: 0, durationSeconds: 3 });
      const database = db ? new URL(db.url).pathname.slice(1) : '';
      const before = db ? backendsCpu(database) : 0;
      const result = await processes.runLoad<LoadResult>({ ...job, warmupSeconds: 0, durationSeconds: SECONDS });
      const postgresUs = db ? Math.round(((backendsCpu(database) - before) * 1e6) / result.requests) : undefined;
      return { rps: Math.round(result.rps), p99: result.p99, serverUs: result.cpuUs, postgresUs, statuses: result.statuses };
    } finally {
      await server.stop();
    }
  } finally {
    await db?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  if (!baseDir || !newDir || !maintenance) {
    console.error('usage: node --import tsx scripts/pg-submit-ab.ts BASE_DIR NEW_DIR POSTGRES_MAINTENANCE_URL [--rounds 3 --duration 8]');
    return 2;
  }
  const trees = new Map<string, Tree>();
  for (const dir of [baseDir, newDir]) {
    trees.set(dir, {
      fixture: (await import(path.resolve(dir, 'scripts/bench/fixture.ts'))) as Tree['fixture'],
      processes: (await import(path.resolve(dir, 'scripts/bench/processes.ts'))) as Tree['processes'],
    });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const dir of round % 2 === 0 ? [newDir, baseDir] : [baseDir, newDir]) {
      const pg = await run(dir, trees.get(dir)!, maintenance);
      const sqlite = await run(dir, trees.get(dir)!, undefined);
      const which = dir === newDir ? 'new' : 'base';
      const load = os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ');
      console.log(
        `round ${round} ${which}: Postgres ${pg.rps}/s (p99 ${pg.p99} ms, server ${pg.serverUs} µs, Postgres ${pg.postgresUs} µs per submission), ` +
          `SQLite ${sqlite.rps}/s (server ${sqlite.serverUs} µs): ratio ${(pg.rps / sqlite.rps).toFixed(2)}; load ${load}; ${JSON.stringify(pg.statuses)} ${JSON.stringify(sqlite.statuses)}`,
      );
    }
  }
  return 0;
}

runMain(main);
