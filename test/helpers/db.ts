/**
 * A migrated database in a temp dir, for unit and property tests of the domain
 * (SQLite in the dir, or its own Postgres database under TEST_DATABASE_URL).
 */
import fs from 'node:fs';
import { openDb, sqliteFile, type Db } from '../../server/storage/db.ts';
import * as accounts from '../../server/domain/accounts.ts';
import type { Clock } from '../../server/domain/clock.ts';
import { tempDataDir } from './server.ts';
import { dbOptionsFor, dropDatabaseFor, TEST_DATABASE_URL } from './database.ts';

export interface TestDb {
  db: Db;
  dir: string;
  close(): Promise<void>;
}

/**
 * A SQLite file migrated once per test process: a fresh database is a copy of
 * it, since migrating one takes a few times as long as copying it, and property
 * tests open one per run. Each is still a database nothing has touched but
 * the migrations (the migrations themselves run fresh in every server test).
 */
let migrated: Promise<string> | undefined;

function migratedSqlite(): Promise<string> {
  migrated ??= (async () => {
    const dir = tempDataDir();
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    const db = await openDb({ dataDir: dir });
    await db.destroy(); // its write-ahead log checkpointed into the file
    return sqliteFile(dir);
  })();
  return migrated;
}

/** A migrated database of its own, in `dir` (default: a new temp dir, whose SQLite database starts as a copy of the migrated one). */
export async function openTestDb(given?: string): Promise<TestDb> {
  const dir = given ?? tempDataDir();
  if (given === undefined && !TEST_DATABASE_URL) fs.copyFileSync(await migratedSqlite(), sqliteFile(dir));
  const db = await openDb(await dbOptionsFor(dir));
  return {
    db,
    dir,
    async close() {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
      await dropDatabaseFor(dir);
    },
  };
}

/** A clock tests move by hand, e.g. across a UTC month boundary. */
export class ManualClock implements Clock {
  /** Every worker of a test reads this one clock, so it stamps job leases (as the database's clock does in production). */
  readonly shared = true;
  constructor(private t: Date) {}
  now(): Date {
    return new Date(this.t);
  }
  set(t: Date | string): void {
    this.t = new Date(t);
  }
  advance(ms: number): void {
    this.t = new Date(this.t.getTime() + ms);
  }
}

export async function makeAccountWithKey(
  db: Db,
  clock: Clock,
  input: { llmAllowance?: number; paidConsent?: boolean; cap?: number } = {},
): Promise<{ accountId: string; keyId: string }> {
  const a = await accounts.createAccount(db, clock, { name: 'a', llmAllowance: input.llmAllowance, paidConsent: input.paidConsent });
  const { key } = await accounts.createKey(db, clock, 'gf', { accountId: a.id, name: 'k', scopes: ['generate'], monthlyCap: input.cap });
  return { accountId: a.id, keyId: key.id };
}

/** The system's time moved by hand: later by `advance(ms)`, everything else as the real clock (workers keep running). */
export class OffsetClock implements Clock {
  private offset = 0;
  now(): Date {
    return new Date(Date.now() + this.offset);
  }
  advance(ms: number): void {
    this.offset += ms;
  }
}
