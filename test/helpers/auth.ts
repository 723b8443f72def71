/** Helpers for the one-second rule of the server's key cache (domain/principal-cache.ts). */
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { dbEnvFor } from './database.ts';

/**
 * Calls `request` every 20 ms until it answers `status` or `ms` have passed;
 * returns the last status and how long it took.
 */
export async function statusWithin(request: () => Promise<Response>, status: number, ms: number): Promise<number> {
  return (await timeToStatus(request, status, ms)).status;
}

export async function timeToStatus(request: () => Promise<Response>, status: number, ms: number): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  for (;;) {
    const res = await request();
    await res.arrayBuffer();
    const took = performance.now() - started;
    if (res.status === status || took > ms) return { status: res.status, ms: took };
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts a second process on the server's database, ready to revoke a key or
 * block an account; `go()` makes the change there and resolves once it is
 * committed. Whatever happens after `go()` was called is at least as late as the
 * commit, so timing from that call over-states the delay, never under-states it.
 */
export async function changeElsewhere(dataDir: string, action: 'revoke' | 'block', id: string): Promise<{ go(): Promise<void> }> {
  const script = path.join(import.meta.dirname, 'account-change-child.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', script, action, id], {
    env: { ...process.env, ...(await dbEnvFor(dataDir)) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`account-change child exited with ${code}`)));
    });
  const ready = await next();
  if (ready !== 'ready') throw new Error(`account-change child said ${ready}`);
  return {
    async go() {
      const done = next();
      child.stdin.write('go\n');
      if ((await done) !== 'done') throw new Error('account-change child failed');
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    },
  };
}
