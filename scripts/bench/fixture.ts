/**
 * What the request benchmarks measure against: an account with plenty of Gems
 * and LLM allowance and a key with both scopes, and one image task generated to
 * the end, so task reads show signed outputs (bench-http.ts, profile-http.ts).
 */
import { openDb } from '../../server/storage/db.ts';
import * as accounts from '../../server/domain/accounts.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { systemClock } from '../../server/domain/clock.ts';
import { startGemforge } from './processes.ts';

/** The image submission the benchmarks send. */
export const IMAGE = { model: 'gemforge-image-1', prompt: 'a red fox in the snow', parameters: { outputCount: 2, ratio: '16:9', resolution: '1024' } };

/** Creates the account and key in `dataDir`'s database; returns the key's secret. */
export async function seedBenchKey(dataDir: string): Promise<string> {
  const db = await openDb({ dataDir });
  try {
    const account = await accounts.createAccount(db, systemClock, { name: 'bench', llmAllowance: 1_000_000_000 });
    await ledger.credit(db, systemClock, account.id, 1_000_000_000, 'bench grant');
    const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'bench', scopes: ['read', 'generate'] });
    return secret;
  } finally {
    await db.destroy();
  }
}

/** Submits IMAGE once (worker on) and waits until it succeeded; returns the task and its identity. */
export async function generatedTask(dataDir: string, logFile: string, auth: Record<string, string>): Promise<{ taskId: string; idemKey: string }> {
  const server = await startGemforge({ DATA_DIR: dataDir, NODE_ENV: 'production', LOG_LEVEL: 'warn' }, logFile);
  try {
    const idemKey = 'bench-replayed-identity';
    const res = await fetch(`${server.base}/api/generate/image`, { method: 'POST', headers: { ...auth, 'idempotency-key': idemKey }, body: JSON.stringify(IMAGE) });
    const { task } = (await res.json()) as { task: { id: string } };
    for (let i = 0; ; i++) {
      const view = (await (await fetch(`${server.base}/api/generate/tasks/${task.id}`, { headers: auth })).json()) as { task: { status: string } };
      if (view.task.status === 'succeeded') return { taskId: task.id, idemKey };
      if (i > 600) throw new Error(`bench task stayed ${view.task.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await server.stop();
  }
}
