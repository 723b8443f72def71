/**
 * The real server as a child process (`node` with SERVER_ARGS, as `npm start`), for
 * tests that kill it (SIGKILL mid-work) and start it again on the same DATA_DIR.
 * The child logs JSON at LOG_LEVEL=info; its start line carries `url`. Under
 * TEST_DATABASE_URL it gets DATABASE_URL of the data dir's Postgres database.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { after } from 'node:test';
import path from 'node:path';
import readline from 'node:readline';
import { openDb } from '../../server/storage/db.ts';
import * as accounts from '../../server/domain/accounts.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { systemClock } from '../../server/domain/clock.ts';
import { dbEnvFor, dbOptionsFor } from './database.ts';
import { tempDataDir } from './server.ts';
import { patiently } from './poll.ts';
import { SERVER_ARGS } from '../../server/node-flags.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface ServerChild {
  url: string;
  child: ChildProcess;
  /** Every log line the child printed so far (parsed JSON, or `{ raw }`). */
  logs: Array<Record<string, unknown>>;
  /** Resolves with the exit code or signal once the child is gone. */
  exited: Promise<number | NodeJS.Signals | null>;
  /** Sends a signal (default SIGTERM) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<number | NodeJS.Signals | null>;
}

/**
 * Starts the server on a free port with `env` added to this process's
 * environment (DATA_DIR is required) and waits until it logs its URL (a
 * start takes a few seconds; the bound is for one that never comes).
 */
export async function startServerChild(env: Record<string, string> & { DATA_DIR: string }, nominalMs = 30_000): Promise<ServerChild> {
  const timeoutMs = patiently(nominalMs);
  const child = spawn(process.execPath, [...SERVER_ARGS], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', NODE_ENV: 'test', ...(await dbEnvFor(env.DATA_DIR)), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server child did not start within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    const lines = readline.createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        entry = { raw: line };
      }
      logs.push(entry);
      if (typeof entry.url === 'string') {
        clearTimeout(timer);
        resolve(entry.url);
      }
    });
    void exited.then((how) => {
      clearTimeout(timer);
      reject(new Error(`the server child exited (${String(how)}) before listening\n${stderr}`));
    });
  });

  return {
    url,
    child,
    logs,
    exited,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Before any server runs on `dataDir`: an account with an LLM allowance and a `generate` key; returns the key's secret. */
export async function generateKeyOnDisk(dataDir: string, llmAllowance: number): Promise<string> {
  const db = await openDb(await dbOptionsFor(dataDir));
  try {
    const account = await accounts.createAccount(db, systemClock, { name: 'crash', llmAllowance });
    return (await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'k', scopes: ['generate'] })).secret;
  } finally {
    await db.destroy();
  }
}

/** Before (or beside) a server on `dataDir`: an account with `gems` and a `read`+`generate` key, made directly in its database. */
export async function seedUserOnDisk(dataDir: string, gems = 500): Promise<{ accountId: string; secret: string }> {
  const db = await openDb(await dbOptionsFor(dataDir));
  try {
    const a = await accounts.createAccount(db, systemClock, { name: 'on-disk' });
    await ledger.credit(db, systemClock, a.id, gems, 'grant');
    const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: a.id, name: 'k', scopes: ['read', 'generate'] });
    return { accountId: a.id, secret };
  } finally {
    await db.destroy();
  }
}

/**
 * One data dir for a suite's child servers: `start` runs one on it (env added),
 * and after the suite every child is killed and the data dir removed.
 */
export function childServers(): { dataDir: string; start(env?: Record<string, string>): Promise<ServerChild> } {
  const dataDir = tempDataDir();
  const children: ServerChild[] = [];
  after(async () => {
    for (const c of children) await c.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    dataDir,
    async start(env = {}) {
      const child = await startServerChild({ ...env, DATA_DIR: dataDir });
      children.push(child);
      return child;
    },
  };
}
