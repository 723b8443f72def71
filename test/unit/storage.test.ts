/**
 * The storage layer on whichever database the suite runs (SQLite by default,
 * Postgres under `npm run test:postgres`): the same plain rows from both drivers,
 * and a fresh database that several processes open at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { inTransaction, isSqlite, openDb } from '../../server/storage/db.ts';
import { executeLater, type Build } from '../../server/storage/engine/compiled.ts';
import { CHECKPOINT_EVERY_MS } from '../../server/storage/engine/checkpoint.ts';
import { ReadConnection } from '../../server/storage/engine/reads.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { tempDataDir } from '../helpers/server.ts';
import { dbOptionsFor, dropDatabaseFor } from '../helpers/database.ts';
import { ManualClock, makeAccountWithKey, openTestDb, type TestDb } from '../helpers/db.ts';
import { until } from '../helpers/poll.ts';

describe('storage', () => {
  let t: TestDb;
  const clock = new ManualClock(new Date('2026-11-10T12:00:00Z'));
  before(async () => {
    t = await openTestDb();
  });
  after(() => t.close());

  it('when rows with bigint columns, counts and sums are read, then whole numbers come back as numbers and flags as booleans', async () => {
    const { accountId, keyId } = await makeAccountWithKey(t.db, clock, { cap: 9_007_199_254_740_991, llmAllowance: 12 });
    await ledger.credit(t.db, clock, accountId, 50, 'grant');
    await ledger.reserve(t.db, clock, { accountId, keyId, purpose: 'media', amount: 7 });
    const rsv = await t.db('reservations').where({ account_id: accountId }).first();
    assert.equal(rsv.hold_paid + rsv.hold_allowance, 7);
    const key = await t.db('api_keys').where({ id: keyId }).first();
    assert.equal(key.monthly_cap, Number.MAX_SAFE_INTEGER);
    const count = await t.db('ledger_entries').where({ account_id: accountId }).count({ n: '*' }).first();
    assert.equal(count?.n, 2);
    const sum = await t.db('ledger_entries').where({ account_id: accountId }).sum({ s: 'paid' }).first();
    assert.equal(sum?.s, 57);
    const summary = await ledger.accountSummary(t.db, clock, accountId, [keyId]);
    assert.deepEqual([summary.balance, summary.keySpendThisMonth[keyId], summary.llmAllowanceUsed], [43, 7, 0]);
  });

  it('when three processes open one fresh database at once, then each migrates or waits, and all open it', async () => {
    const dir = tempDataDir();
    try {
      const options = await dbOptionsFor(dir);
      const opened = await Promise.allSettled([openDb(options), openDb(options), openDb(options)]);
      for (const o of opened) if (o.status === 'fulfilled') await o.value.destroy();
      assert.deepEqual(
        opened.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok')),
        ['ok', 'ok', 'ok'],
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await dropDatabaseFor(dir);
    }
  });

  it('when a process was killed while migrating (knex lock left set, lock file of a dead pid), then the next start migrates anyway', async () => {
    const dir = tempDataDir();
    try {
      const options = await dbOptionsFor(dir);
      const first = await openDb(options);
      await first('knex_migrations_lock').update({ is_locked: 1 });
      await first.destroy();
      if (!options.databaseUrl) fs.writeFileSync(`${dir}/gemforge.sqlite.migrate-lock`, '2147483646');
      const again = await openDb(options);
      assert.equal((await again('knex_migrations_lock').first()).is_locked, 0);
      await again.destroy();
      assert.equal(fs.existsSync(`${dir}/gemforge.sqlite.migrate-lock`), false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await dropDatabaseFor(dir);
    }
  });

  it('when DATABASE_URL is not a Postgres URL, then opening fails with a message that says what is expected', async () => {
    await assert.rejects(openDb({ dataDir: 'unused', databaseUrl: 'mysql://u@h/db' }), /DATABASE_URL must be a Postgres URL/);
  });

  it('when a SQLite query has a limit, in a transaction or not, then the limit is written into its SQL (a bound one re-prepares a kept statement on every run) and the rows are the same', async (ctx) => {
    if (!isSqlite(t.db)) return ctx.skip('SQLite only');
    const { accountId } = await makeAccountWithKey(t.db, clock, {});
    const first = t.db('accounts').where({ id: accountId }).first().toSQL().toNative();
    assert.match(first.sql, / limit 1$/);
    assert.deepEqual(first.bindings, [accountId]);
    const paged = t.db('accounts').limit(5).offset(3).toSQL().toNative();
    assert.match(paged.sql, / limit 5 offset \?$/);
    assert.deepEqual(paged.bindings, [3]);
    await t.db.transaction(async (trx) => {
      const inTrx = trx('accounts').where({ id: accountId }).first().toSQL().toNative();
      assert.match(inTrx.sql, / limit 1$/);
      assert.equal((await trx('accounts').where({ id: accountId }).first())?.id, accountId);
    });
    assert.equal((await t.db('accounts').where({ id: accountId }).first())?.id, accountId);
    assert.equal((await t.db('accounts').limit(1).offset(0)).length, 1);
  });

  it('when a SQLite writer commits pages, then the checkpoint connection copies them into the database file within moments, not the writer at a commit', async (ctx) => {
    if (!isSqlite(t.db)) return ctx.skip('SQLite only');
    const dir = tempDataDir();
    const db = await openDb({ dataDir: dir });
    try {
      const file = path.join(dir, 'gemforge.sqlite');
      await db.schema.createTable('bulk', (table) => table.text('body'));
      await new Promise((r) => setTimeout(r, 2 * CHECKPOINT_EVERY_MS));
      const before = fs.statSync(file).size;
      // About 1,000 pages: below the writer's own automatic checkpoint, so only the checkpoint connection copies them.
      for (let i = 0; i < 10; i++) await db('bulk').insert(Array.from({ length: 40 }, () => ({ body: 'x'.repeat(10_000) })));
      // Polled: a checkpoint or two, however late a loaded machine runs its timer.
      await until('the database file to grow by the pages written', () => fs.statSync(file).size - before >= 3_000_000, 10 * CHECKPOINT_EVERY_MS, 20);
    } finally {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when a read is under way on the read connections, then another run of the same read does not wait for it, and both return their rows', async (ctx) => {
    if (!isSqlite(t.db)) return ctx.skip('SQLite only');
    const dir = tempDataDir();
    const db = await openDb({ dataDir: dir });
    const count = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c';
    const finished: string[] = [];
    const read = async (reader: ReadConnection, upTo: number, name: string) => {
      const rows = await reader.all(
        reader.plan('count', () => ({ sql: count, bindings: [0] })),
        [upTo],
      );
      finished.push(name);
      return rows[0]?.n;
    };
    try {
      for (const lanes of [1, 2]) {
        const reader = await ReadConnection.open(path.join(dir, 'gemforge.sqlite'), lanes);
        finished.length = 0;
        try {
          assert.deepEqual(await Promise.all([read(reader, 2_000_000, 'slow'), read(reader, 3, 'quick')]), [2_000_000, 3]);
        } finally {
          await reader.close();
        }
        // One connection runs a statement's calls one after another; a second one takes the quick read at once.
        assert.deepEqual(finished, lanes === 1 ? ['slow', 'quick'] : ['quick', 'slow'], `${lanes} lane(s)`);
      }
    } finally {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when a waiting write fails as the transaction commits, then inTransaction fails with its error, nothing of the transaction is kept, and the next one commits', async () => {
    const dir = tempDataDir();
    const db = await openDb({ dataDir: dir });
    try {
      await db.schema.createTable('pairs', (table) => {
        table.integer('n').primary();
        table.text('t');
      });
      const put: Build = (c, n, t) => c('pairs').insert({ n, t });
      await inTransaction(db, async (trx) => {
        await executeLater(trx, 'put-pair', put, [1, 'one']);
      });
      const failed = await inTransaction(db, async (trx) => {
        await executeLater(trx, 'put-pair', put, [2, 'two']);
        await executeLater(trx, 'put-pair', put, [1, 'again']); // the primary key refuses it
        return 'committed';
      }).catch((error: unknown) => error);
      assert.match(String(failed), /UNIQUE constraint failed|duplicate key/);
      assert.deepEqual(await db('pairs').orderBy('n'), [{ n: 1, t: 'one' }]);
      await inTransaction(db, (trx) => executeLater(trx, 'put-pair', put, [3, 'three']));
      assert.deepEqual(
        (await db('pairs').orderBy('n')).map((r: { n: number }) => r.n),
        [1, 3],
      );
    } finally {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
