/**
 * server/storage/engine/query.ts, the one way storage queries: each
 * kind gives the same answers outside and inside a transaction, on SQLite and on
 * Postgres (TEST_DATABASE_URL), and a name that gives two SQL texts, or a
 * parameter not bound as a value, is refused under the test runner.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inTransaction, isSqlite } from '../../server/storage/db.ts';
import { query, statement } from '../../server/storage/engine/query.ts';
import { openTestDb, type TestDb } from '../helpers/db.ts';

describe('query()', () => {
  let t: TestDb;
  before(async () => {
    t = await openTestDb();
    await query(
      t.db,
      statement.dynamic('query-test-table', (c) =>
        c.schema.createTable('query_test', (table) => {
          table.integer('n').primary();
          table.text('t');
        }),
      ),
    );
  });
  after(() => t.close());

  const put = statement.write('query-test-put', (c, n, text) => c('query_test').insert({ n, t: text }));
  const putLater = statement.later('query-test-put-later', (c, n, text) => c('query_test').insert({ n, t: text }));
  const rename = statement.write('query-test-rename', (c, n, text) => c('query_test').where({ n }).update({ t: text }));
  const all = statement.rows<{ n: number; t: string }>('query-test-all', (c) => c('query_test').orderBy('n'));
  const one = statement.first<{ n: number; t: string }>('query-test-one', (c, n) => c('query_test').where({ n }).first());
  const byText = statement.byKey<{ n: number }>('query-test-by-text', 't', (c) => c('query_test').select('n').orderBy('n'));

  it('when each kind runs outside and inside a transaction, then both give the same answers', async () => {
    await query(t.db, put, [1, 'one']);
    await query(t.db, putLater, [2, 'two']);
    await inTransaction(t.db, async (trx) => {
      await query(trx, put, [3, 'three']);
      await query(trx, putLater, [4, 'two']);
      assert.equal((await query(trx, rename, [3, 'drei'])).changes, 1);
      assert.equal((await query(trx, rename, [99, 'none'])).changes, 0);
      assert.deepEqual(await query(trx, one, [3]), { n: 3, t: 'drei' }, 'a transaction reads its own writes');
      assert.deepEqual(
        (await query(trx, byText, ['two'])).map((r) => r.n),
        [2, 4],
      );
    });
    assert.equal((await query(t.db, rename, [1, 'eins'])).changes, 1);
    assert.deepEqual(
      (await query(t.db, all)).map((r) => [r.n, r.t]),
      [
        [1, 'eins'],
        [2, 'two'],
        [3, 'drei'],
        [4, 'two'],
      ],
    );
    assert.deepEqual(await query(t.db, one, [2]), { n: 2, t: 'two' });
    assert.equal(await query(t.db, one, [99]), undefined);
    const [a, b] = await Promise.all([query(t.db, byText, ['two']), query(t.db, byText, ['eins'])]);
    assert.deepEqual([a.map((r) => r.n), b.map((r) => r.n)], [[2, 4], [1]]);
  });

  it('when one name gives two SQL texts, then query() refuses it, naming the statement', async () => {
    const first = statement.rows('query-test-shape', (c) => c('query_test').where({ n: 1 }));
    const other = statement.rows('query-test-shape', (c) => c('query_test').where({ t: 'x' }));
    await query(t.db, first);
    await assert.rejects(query(t.db, other), /statement query-test-shape: one name, two SQL texts/);
  });

  it('when a procedure runs, then its one statement makes every write or none (a view and its trigger on SQLite, a function on Postgres), and inside a transaction it is refused', async () => {
    const putTwo = statement.procedure('query-test-put-two', (c, n, text) =>
      isSqlite(c) ? c('query_test_two').insert({ n, t: text }) : c.raw('SELECT query_test_put_two(?, ?)', [n, text]),
    );
    // Two rows, the second refused when the first's number is taken: a view whose INSTEAD OF trigger writes them on
    // SQLite, a PL/pgSQL function on Postgres (as migrations 021–024 make the real ones).
    const ddl = isSqlite(t.db)
      ? [
          `CREATE VIEW query_test_two AS SELECT NULL AS n, NULL AS t WHERE 0`,
          `CREATE TRIGGER query_test_two_insert INSTEAD OF INSERT ON query_test_two BEGIN
            INSERT INTO query_test (n, t) VALUES (NEW.n + 100, NEW.t);
            INSERT INTO query_test (n, t) VALUES (NEW.n, NEW.t);
          END`,
        ]
      : [
          `CREATE FUNCTION query_test_put_two(n integer, t text) RETURNS void LANGUAGE plpgsql AS $$
          BEGIN
            INSERT INTO query_test (n, t) VALUES (query_test_put_two.n + 100, query_test_put_two.t);
            INSERT INTO query_test (n, t) VALUES (query_test_put_two.n, query_test_put_two.t);
          END $$`,
        ];
    for (const [i, sql] of ddl.entries())
      await query(
        t.db,
        statement.dynamic(`query-test-two-ddl-${i}`, (c) => c.raw(sql)),
      );
    assert.equal(await query(t.db, putTwo, [10, 'ten']), true);
    assert.deepEqual(await query(t.db, one, [110]), { n: 110, t: 'ten' });
    assert.deepEqual(await query(t.db, one, [10]), { n: 10, t: 'ten' });
    // 1 is taken: the second insert fails, and the first (101) is undone with it.
    await assert.rejects(query(t.db, putTwo, [1, 'again']), /SQLITE_CONSTRAINT|duplicate key/);
    assert.equal(await query(t.db, one, [101]), undefined);
    await assert.rejects(
      inTransaction(t.db, (trx) => query(trx, putTwo, [20, 'twenty'])),
      /a procedure runs alone, outside any transaction/,
    );
  });

  it('when a builder puts a parameter into the SQL text instead of binding it, then query() refuses it', async () => {
    const sized = statement.rows('query-test-identifier', (c, column) => c('query_test').select(String(column)));
    await assert.rejects(query(t.db, sized, ['n']), /a parameter is not bound as a value/);
  });
});
