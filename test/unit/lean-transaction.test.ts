/**
 * inTransaction (server/storage/engine/knex-adapter.ts): knex's transaction life
 * cycle and query surface, without knex's per-transaction knex instance, on the
 * database the suite runs on (SQLite, or Postgres under `npm run test:postgres`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { inTransaction, openDb, type Db } from '../../server/storage/db.ts';
import { execute, executeLater, type Build } from '../../server/storage/engine/compiled.ts';
import { tempDataDir } from '../helpers/server.ts';
import { dbOptionsFor, dropDatabaseFor } from '../helpers/database.ts';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

describe('transactions of inTransaction', () => {
  const dir = tempDataDir();
  let db: Db;
  before(async () => {
    db = await openDb(await dbOptionsFor(dir));
    await db.schema.createTable('parents', (table) => {
      table.integer('n').primary();
      table.text('t');
    });
    // A foreign key checked only at COMMIT: the way to make a COMMIT itself fail.
    await db.raw('CREATE TABLE kids (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parents(n) DEFERRABLE INITIALLY DEFERRED)');
  });
  after(async () => {
    await db.destroy();
    await dropDatabaseFor(dir);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const names = async () => (await db('parents').orderBy('n')).map((r: { t: string }) => r.t);
  const clear = () => db.raw('DELETE FROM kids').then(() => db('parents').del());

  it("when a transaction queries through knex's surface (table starter, select, raw, fn, count), then it sees its own writes and others see them only after COMMIT", async () => {
    await clear();
    let seenOutside: unknown;
    const other = await openDb(await dbOptionsFor(dir)); // another process's view: committed data only
    try {
      const inside = await inTransaction(db, async (trx) => {
        await trx('parents').insert({ n: 1, t: 'one' });
        await trx.insert({ n: 2, t: 'two' }).into('parents');
        await trx.raw('INSERT INTO parents (n, t) VALUES (?, ?)', [3, 'three']);
        await trx('parents')
          .where({ n: 3 })
          .update({ t: trx.raw('upper(t)') });
        seenOutside = await other('parents').select('t');
        const count = await trx('parents').count({ c: '*' }).first();
        const selected = await trx.select('t').from('parents').where('n', '<', 3).orderBy('n');
        const now = await trx.raw(`SELECT ${trx.fn.now().toQuery()} AS now`);
        const rows = (Array.isArray(now) ? now : (now as { rows: unknown[] }).rows) as Array<{ now: unknown }>; // raw: SQLite's rows, pg's result
        return { count: count?.c, selected: selected.map((r: { t: string }) => r.t), now: rows[0]?.now !== undefined };
      });
      assert.deepEqual(inside, { count: 3, selected: ['one', 'two'], now: true });
      assert.deepEqual(seenOutside, []);
      assert.deepEqual(await names(), ['one', 'two', 'THREE']);
      assert.deepEqual(
        (await other('parents').orderBy('n')).map((r: { t: string }) => r.t),
        ['one', 'two', 'THREE'],
      );
    } finally {
      await other.destroy();
    }
  });

  it('when the function throws, then inTransaction fails with what it threw, nothing of it is kept (waiting writes included), and the next transaction commits', async () => {
    await clear();
    const put: Build = (c, n, t) => c('parents').insert({ n, t });
    const thrown = new Error('refused by a rule');
    const failed = await inTransaction(db, async (trx) => {
      await trx('parents').insert({ n: 1, t: 'one' });
      await executeLater(trx, 'tx-test-put', put, [2, 'two']);
      throw thrown;
    }).catch((error: unknown) => error);
    assert.equal(failed, thrown);
    assert.deepEqual(await names(), []);
    await inTransaction(db, (trx) => execute(trx, 'tx-test-put', put, [4, 'four']));
    assert.deepEqual(await names(), ['four']);
  });

  it('when the COMMIT itself fails, then inTransaction fails with its error, the transaction is rolled back, and the connection goes on committing', async () => {
    await clear();
    const failed = await inTransaction(db, async (trx) => {
      await trx('parents').insert({ n: 1, t: 'one' });
      await trx('kids').insert({ id: 1, parent: 99 }); // no such parent: refused only at COMMIT
    }).catch((error: unknown) => error);
    assert.match(String(failed), /FOREIGN KEY constraint failed|violates foreign key constraint/);
    assert.deepEqual(await names(), []);
    // Left inside the transaction, the next BEGIN would fail ("cannot start a transaction within a transaction").
    await inTransaction(db, (trx) => trx('parents').insert({ n: 2, t: 'two' }));
    assert.deepEqual(await names(), ['two']);
  });

  it('when a query is started on a transaction after it ended, then it is refused as knex refuses it, and nothing is written', async () => {
    await clear();
    let kept: Parameters<Parameters<typeof inTransaction>[1]>[0] | undefined;
    await inTransaction(db, async (trx) => {
      kept = trx;
      await trx('parents').insert({ n: 1, t: 'one' });
    });
    assert.equal(kept!.isCompleted(), true);
    await assert.rejects(
      kept!('parents')
        .insert({ n: 2, t: 'late' })
        .then(() => undefined),
      /Transaction query already complete/,
    );
    await assert.rejects(
      execute(kept!, 'tx-test-late', (c, n, t) => c('parents').insert({ n, t }), [3, 'late']),
      /already complete/,
    );
    assert.deepEqual(await names(), ['one']);
  });

  it('when a transaction asks for a nested transaction or to end itself, then it gets a clear error and the outer transaction rolls back', async () => {
    await clear();
    for (const misuse of [
      (trx: never) => (trx as { transaction: (f: () => Promise<void>) => Promise<void> }).transaction(async () => undefined),
      (trx: never) => (trx as { commit: () => Promise<void> }).commit(),
    ]) {
      const failed = await inTransaction(db, async (trx) => {
        await trx('parents').insert({ n: 1, t: 'one' });
        await misuse(trx as never);
      }).catch((error: unknown) => error);
      assert.match(String(failed), /not available on a transaction of inTransaction/);
    }
    assert.deepEqual(await names(), []);
  });

  it(
    'when many transactions are started at once on SQLite, then they run one at a time in the order they were started, each seeing the one before',
    { skip: onPostgres ? 'SQLite only (one writer; Postgres runs them side by side)' : false },
    async () => {
      await clear();
      await db('parents').insert({ n: 0, t: '0' });
      const order: number[] = [];
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          inTransaction(db, async (trx) => {
            const last = (await trx('parents').max({ m: 'n' }).first()) as { m: number };
            order.push(i);
            await trx('parents').insert({ n: last.m + 1, t: String(i) });
          }),
        ),
      );
      assert.deepEqual(
        order,
        Array.from({ length: 40 }, (_, i) => i),
      );
      assert.equal((await db('parents').count({ c: '*' }).first())?.c, 41);
    },
  );
});
