/**
 * Reads by key (storage/engine/reads.ts `readByKey`): on SQLite's read connections the
 * reads of one plan asked for in one round of the event loop go out as one
 * statement, and each still gets exactly its own rows; elsewhere (Postgres, a
 * transaction) each reads alone through knex, with the same rows.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import { inTransaction, isSqlite, onStatement } from '../../server/storage/db.ts';
import { KEY_COLUMN, readByKey } from '../../server/storage/engine/reads.ts';
import { openTestDb, type TestDb } from '../helpers/db.ts';

describe('reads by key', () => {
  let t: TestDb;
  const parts = (c: Knex) => c('parts').select('n').orderBy('n');
  /** Statements that read `parts`, reported by the database's trace. */
  let seen: string[] = [];
  let off: () => void;

  before(async () => {
    t = await openTestDb();
    await t.db.schema.createTable('parts', (table) => {
      table.increments('id');
      table.text('owner').notNullable();
      table.integer('n').notNullable();
    });
    await t.db('parts').insert([
      { owner: 'a', n: 2 },
      { owner: 'b', n: 5 },
      { owner: 'a', n: 1 },
    ]);
    off = onStatement(t.db, (sql) => /parts/.test(sql) && seen.push(sql));
  });
  after(async () => {
    off();
    await t.close();
  });

  /** sqlite3 reports a statement's trace shortly after it runs. */
  const settle = () => new Promise((r) => setTimeout(r, 50));
  const ns = (rows: Array<Record<string, unknown>>) => rows.map((r) => Number(r.n));

  it('when reads of several keys are asked for in one round of the event loop, then one statement carries them all and each read gets its own rows in order', async () => {
    await settle();
    seen = [];
    const reads = await Promise.all(['a', 'b', 'a', 'nobody'].map((key) => readByKey(t.db, 'parts-by-owner', parts, 'owner', key)));
    await settle();
    assert.deepEqual(reads.map(ns), [[1, 2], [5], [1, 2], []]);
    assert.deepEqual(
      reads[1]?.map((r) => r[KEY_COLUMN]),
      ['b'],
      'every row carries its key',
    );
    assert.equal(seen.length, isSqlite(t.db) ? 1 : 4, seen.join('\n'));
  });

  it('when reads are asked for in separate rounds, then each goes out as its own statement', async () => {
    await settle();
    seen = [];
    assert.deepEqual(ns(await readByKey(t.db, 'parts-by-owner', parts, 'owner', 'a')), [1, 2]);
    assert.deepEqual(ns(await readByKey(t.db, 'parts-by-owner', parts, 'owner', 'b')), [5]);
    await settle();
    assert.equal(seen.length, 2, seen.join('\n'));
  });

  it('when more keys gather than one statement carries, then they go out in several statements and each read still gets its own rows', async () => {
    await settle();
    seen = [];
    const keys = [...Array.from({ length: 40 }, (_, i) => `k${i}`), 'b', 'a'];
    const reads = await Promise.all(keys.map((key) => readByKey(t.db, 'parts-by-owner', parts, 'owner', key)));
    await settle();
    assert.deepEqual(reads.slice(-2).map(ns), [[5], [1, 2]]);
    assert.ok(reads.slice(0, 40).every((rows) => rows.length === 0));
    if (isSqlite(t.db)) assert.equal(seen.length, 2, seen.join('\n'));
  });

  it('when the gathered statement fails, then every read in it fails with its error, and reads of another plan are untouched', async () => {
    const broken = (c: Knex) => c('parts').select('no_such_column');
    const results = await Promise.allSettled([
      readByKey(t.db, 'parts-broken', broken, 'owner', 'a'),
      readByKey(t.db, 'parts-broken', broken, 'owner', 'b'),
      readByKey(t.db, 'parts-by-owner', parts, 'owner', 'b'),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'rejected', 'fulfilled'],
    );
    for (const r of results.slice(0, 2)) assert.match(String((r as PromiseRejectedResult).reason), /no_such_column/);
  });

  it('when a read by key runs inside a transaction, then it sees the transaction’s own writes', async () => {
    const inside = await inTransaction(t.db, async (trx) => {
      await trx('parts').insert({ owner: 'c', n: 7 });
      return readByKey(trx, 'parts-by-owner', parts, 'owner', 'c');
    });
    assert.deepEqual(ns(inside), [7]);
    assert.deepEqual(
      inside.map((r) => r[KEY_COLUMN]),
      ['c'],
    );
  });
});
