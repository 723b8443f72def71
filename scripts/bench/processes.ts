/**
 * Starting the processes a benchmark measures: each on its own CPU core when
 * the OS allows (`taskset`), so the server and the load generator do not share
 * one, and stopped by pid when done.
 */
import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { COMPILED_SERVER_ARGS, SERVER_ARGS } from '../../server/node-flags.ts';

export const root = path.resolve(import.meta.dirname, '../..');

/** Cores for the server and the load generator, or undefined where pinning is not possible. */
export const pinning: { server: number; load: number } | undefined =
  os.availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0 ? { server: 1, load: 0 } : undefined;

/**
 * The arguments that start gemforge from `tree` as `npm start` runs it in production: the
 * compiled build (dist/server.mjs, built first when missing or stale), which spends ~10–15 %
 * less CPU per chat completion than the same sources run through tsx (measured side by side,
 * docs/performance.md). A tree without the build step (a commit older than it) runs its
 * sources, as `npm start` did then; `BENCH_SOURCES=1` runs the sources of any tree.
 */
export function serverArgs(tree = root): string[] {
  const build = path.join(tree, 'scripts/build.mjs');
  if (process.env.BENCH_SOURCES === '1' || !fs.existsSync(build)) return [...SERVER_ARGS];
  const built = spawnSync(process.execPath, [build, '--if-stale'], { cwd: tree, stdio: ['ignore', 'ignore', 'inherit'] });
  if (built.status !== 0) throw new Error(`building ${tree} for the benchmark failed (exit ${built.status})`);
  return [...COMPILED_SERVER_ARGS];
}

/** The command line for `args` run by this Node, pinned to `core` when pinning is on. */
function pinned(core: number | undefined, args: string[]): [string, string[]] {
  return pinning && core !== undefined ? ['taskset', ['-c', String(core), process.execPath, ...args]] : [process.execPath, args];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface Started {
  child: ChildProcess;
  base: string;
  stop(): Promise<void>;
}

function stopper(child: ChildProcess): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
}

/** Polls `url` until it answers `status`, or fails after 60 s. */
export async function waitFor(url: string, status: number, init: RequestInit = {}): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      const res = await fetch(url, init);
      await res.arrayBuffer();
      if (res.status === status) return;
    } catch {
      /* not listening yet */
    }
    if (i > 600) throw new Error(`${url} did not answer ${status} within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A server script that prints `{"port": n}` on its first stdout line once listening (bare-node.ts,
 * bare-express.ts), with `env` added; on the server's core unless `core` says another (a fake
 * upstream goes beside the load generator, not beside the server it serves).
 */
export async function startScript(script: string, env: Record<string, string> = {}, core = pinning?.server): Promise<Started> {
  const [cmd, args] = pinned(core, ['--import', 'tsx', path.join(import.meta.dirname, script)]);
  const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
    child.stdout.once('data', (chunk: Buffer) => resolve((JSON.parse(chunk.toString().split('\n')[0]) as { port: number }).port));
  });
  child.stdout.resume();
  return { child, base: `http://127.0.0.1:${port}`, stop: stopper(child) };
}

/**
 * Admission limits the benchmarks' floods never reach (one key sends thousands of
 * submissions a second): still checked on every submission, so their cost is in
 * every row, but never refusing. A bench that measures a limit sets its own.
 */
export const LIMITS_NEVER_REACHED: Record<string, string> = {
  KEY_MEDIA_RATE: '100000000',
  KEY_TEXT_RATE: '100000000',
  ACCOUNT_MEDIA_RATE: '100000000',
  ACCOUNT_TEXT_RATE: '100000000',
  ACCOUNT_QUEUED_TASKS: '100000000',
};

/**
 * A Node server run as `node …args(port)` on a free port (on the server's core unless `core` says
 * another), in `cwd` with `env(port)` added, its stdout (and stderr unless `stderr: 'inherit'`) appended
 * to `logFile`; ready once `ready` (a path) answers `status`. A server that exits before then fails
 * the start at once, pointing at its log.
 */
export async function startNodeServer(o: {
  args: (port: number) => string[];
  cwd: string;
  env: (port: number) => Record<string, string>;
  logFile: string;
  ready: { path: string; status: number; init?: RequestInit };
  stderr?: 'inherit' | 'log';
  core?: number;
}): Promise<Started> {
  const port = await freePort();
  const log = fs.openSync(o.logFile, 'a');
  const stdio: StdioOptions = ['ignore', log, o.stderr === 'inherit' ? 'inherit' : log];
  const [cmd, args] = pinned(o.core ?? pinning?.server, o.args(port));
  const child = spawn(cmd, args, { cwd: o.cwd, env: { ...process.env, ...o.env(port) }, stdio });
  fs.closeSync(log);
  const base = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code} before it answered (${o.logFile})`))));
  await Promise.race([waitFor(`${base}${o.ready.path}`, o.ready.status, o.ready.init), exited]);
  exited.catch(() => {});
  return { child, base, stop: stopper(child) };
}

/**
 * gemforge itself (`server/main.ts`) on a data dir, its log lines appended to `logFile`; on the server's core unless `core`
 * says another; from this checkout unless `tree` names another (a detached worktree of an older commit, node_modules linked).
 */
export async function startGemforge(env: Record<string, string>, logFile: string, core = pinning?.server, tree = root): Promise<Started> {
  return startNodeServer({
    args: () => serverArgs(tree),
    cwd: tree,
    env: (port) => ({ ...LIMITS_NEVER_REACHED, ...env, PORT: String(port), HOST: '127.0.0.1' }),
    logFile,
    ready: { path: '/api/generate/models', status: 401 },
    stderr: 'inherit',
    core,
  });
}

/** The Prism mock of the contract (stateless; its own request log discarded). */
export async function startPrism(): Promise<Started> {
  const port = await freePort();
  const prism = path.join(root, 'node_modules/@stoplight/prism-cli/dist/index.js');
  const [cmd, args] = pinned(pinning?.server, [prism, 'mock', '-p', String(port), '-h', '127.0.0.1', 'openapi/openapi.yaml']);
  const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`${base}/api/generate/models`, 200, { headers: { authorization: 'Bearer gf_bench' } });
  return { child, base, stop: stopper(child) };
}

/** Runs one load job in its own process on the load core and returns its JSON result. */
export async function runLoad<T>(job: unknown): Promise<T> {
  const [cmd, args] = pinned(pinning?.load, ['--import', 'tsx', path.join(import.meta.dirname, 'load.ts'), JSON.stringify(job)]);
  const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`load generator exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as T;
}

/** Runs a benchmark's main function as the process: its number is the exit code; a throw prints and exits 1. */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
