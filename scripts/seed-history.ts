/**
 * Seeds an account with a long ledger history, fast: set-based SQL (a recursive
 * CTE, one INSERT … SELECT per table, in one transaction) instead of a million
 * round trips, then the running figures refilled from the rows (as migration 006
 * does). Each historical submission is a settled reservation with its hold, post
 * and void entries (3 ledger rows), dated in the current UTC month so that
 * anything summing the month's rows would have to read them all.
 *
 *   node --import tsx scripts/seed-history.ts --data-dir DIR --entries 1000000
 *
 * prints `{ accountId, keyId, secret }` as JSON; `seedAccount` does the same from code.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openDb, inTransaction, type Db } from '../server/storage/db.ts';
import { fillBalances } from '../server/storage/balances.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock, utcMonth } from '../server/domain/clock.ts';

export interface SeededAccount {
  accountId: string;
  keyId: string;
  secret: string;
}

/** Inserts `reservations` settled reservations (3 ledger rows each) for the account and key. */
async function insertHistory(db: Db, accountId: string, keyId: string, reservations: number): Promise<void> {
  const at = systemClock.now();
  const iso = at.toISOString();
  const month = utcMonth(at);
  const seq = 'WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?)';
  await inTransaction(db, async (trx) => {
    await trx.raw(
      `${seq} INSERT INTO reservations (id, account_id, key_id, purpose, kind, ref, hold_allowance, hold_paid, state, charged, released, month, created_at, settled_at)
       SELECT ? || n, ?, ?, 'media', 'image', NULL, 0, 2, 'settled', 1, 1, ?, ?, ? FROM seq`,
      [reservations, `rsv_hist_${keyId}_`, accountId, keyId, month, iso, iso],
    );
    await trx.raw(
      `${seq} INSERT INTO ledger_entries (account_id, key_id, reservation_id, type, allowance, paid, month, created_at, note)
       SELECT ?, ?, ? || n, t.type, 0, t.paid, ?, ?, NULL
       FROM seq CROSS JOIN (SELECT 'hold' AS type, 2 AS paid UNION ALL SELECT 'post', 1 UNION ALL SELECT 'void', 1) t`,
      [reservations, accountId, keyId, `rsv_hist_${keyId}_`, month, iso],
    );
  });
}

/**
 * A new account and key (scopes read and generate, a cap far above any bench)
 * with `gems` paid Gems and about `entries` ledger rows of history.
 */
export async function seedAccount(db: Db, entries: number, gems: number): Promise<SeededAccount> {
  const account = await accounts.createAccount(db, systemClock, { name: 'history', llmAllowance: 1000 });
  const { key, secret } = await accounts.createKey(db, systemClock, 'gf', {
    accountId: account.id,
    name: 'history',
    scopes: ['read', 'generate'],
    monthlyCap: 1_000_000_000_000,
  });
  await ledger.credit(db, systemClock, account.id, gems, 'seed');
  const reservations = Math.max(0, Math.floor((entries - 1) / 3));
  if (reservations > 0) await insertHistory(db, account.id, key.id, reservations);
  await fillBalances(db);
  return { accountId: account.id, keyId: key.id, secret };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { 'data-dir': { type: 'string' }, entries: { type: 'string', default: '1000' }, gems: { type: 'string', default: '100000000' } },
  });
  if (!values['data-dir']) throw new Error('usage: seed-history.ts --data-dir DIR [--entries N] [--gems N] (DATABASE_URL selects Postgres)');
  const db = await openDb({ dataDir: values['data-dir'], databaseUrl: process.env.DATABASE_URL || undefined });
  try {
    console.log(JSON.stringify(await seedAccount(db, Number(values.entries), Number(values.gems))));
  } finally {
    await db.destroy();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) await main();
