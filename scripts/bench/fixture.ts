/**
 * What the request benchmarks measure against: an account with plenty of Gems
 * and LLM allowance and a key with both scopes, and image tasks generated to
 * the end, so task reads show signed outputs (bench-http.ts, profile-http.ts).
 */
import crypto from 'node:crypto';
import knex from 'knex';
import { openDb } from '../../server/storage/db.ts';
import * as accounts from '../../server/domain/accounts.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { systemClock } from '../../server/domain/clock.ts';
import { startGemforge } from './processes.ts';

/** The image submission the benchmarks send. */
export const IMAGE = { model: 'gemforge-image-1', prompt: 'a red fox in the snow', parameters: { outputCount: 2, ratio: '16:9', resolution: '1024' } };

/** Creates the account and key in `dataDir`'s database (or `databaseUrl`'s); returns the key's secret. */
export async function seedBenchKey(dataDir: string, databaseUrl?: string): Promise<string> {
  const db = await openDb({ dataDir, databaseUrl });
  try {
    const account = await accounts.createAccount(db, systemClock, { name: 'bench', llmAllowance: 1_000_000_000 });
    await ledger.credit(db, systemClock, account.id, 1_000_000_000, 'bench grant');
    const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'bench', scopes: ['read', 'generate'] });
    return secret;
  } finally {
    await db.destroy();
  }
}

/** How many generated tasks the "many tasks" rows read in turn. */
export const MANY_TASKS = 64;

/**
 * Submits IMAGE `count` times (worker on) and waits until every task
 * succeeded; returns the tasks, the first one's identity (replayed by the
 * benchmarks) first.
 */
export async function generatedTasks(dataDir: string, logFile: string, auth: Record<string, string>, count = 1): Promise<{ taskIds: string[]; idemKey: string }> {
  const server = await startGemforge({ DATA_DIR: dataDir, NODE_ENV: 'production', LOG_LEVEL: 'warn' }, logFile);
  try {
    const idemKey = 'bench-replayed-identity';
    const taskIds: string[] = [];
    for (let i = 0; i < count; i++) {
      const key = i === 0 ? idemKey : `bench-task-${i}`;
      const res = await fetch(`${server.base}/api/generate/image`, { method: 'POST', headers: { ...auth, 'idempotency-key': key }, body: JSON.stringify(IMAGE) });
      if (!res.ok) throw new Error(`bench submission answered ${res.status}: ${await res.text()}`);
      taskIds.push(((await res.json()) as { task: { id: string } }).task.id);
    }
    for (const id of taskIds) {
      for (let i = 0; ; i++) {
        const view = (await (await fetch(`${server.base}/api/generate/tasks/${id}`, { headers: auth })).json()) as { task: { status: string } };
        if (view.task.status === 'succeeded') break;
        if (i > 1200) throw new Error(`bench task stayed ${view.task.status}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return { taskIds, idemKey };
  } finally {
    await server.stop();
  }
}

/** A database of its own on the Postgres server at `url` (a role with CREATEDB), dropped by `drop()`. */
export async function benchDatabase(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `gemforge_bench_${crypto.randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  await admin.raw(`CREATE DATABASE "${name}"`);
  const u = new URL(url);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      await admin.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch((error: unknown) => console.error(`bench-postgres: could not drop ${name}: ${String(error)}`));
      await admin.destroy();
    },
  };
}
