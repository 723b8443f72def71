/**
 * The writing connection's prepared statements (storage/engine/statement-cache.ts):
 * the same answers as node-sqlite3's one-shot calls, errors reach their caller,
 * a failed statement never keeps the connection's snapshot, and the connection
 * closes with statements still prepared.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import fc from 'fast-check';
import { cacheStatements } from '../../server/storage/engine/statement-cache.ts';
import { sqliteLiteral } from '../../server/storage/engine/compiled.ts';

type Result = { error: Error | null; rows?: unknown; lastID?: number; changes?: number };

function open(file: string): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(file, (error) => (error ? reject(error) : resolve(db)));
  });
}

/** Calls `conn[method]` as knex's sqlite3 dialect does, and keeps what its callback saw. */
function call(conn: sqlite3.Database, method: 'all' | 'run', sql: string, bindings: unknown[] = []): Promise<Result> {
  return new Promise((resolve) => {
    conn[method](sql, bindings, function (this: sqlite3.RunResult, error: Error | null, rows?: unknown) {
      resolve({ error, rows, lastID: this?.lastID, changes: this?.changes });
    });
  });
}

const exec = (conn: sqlite3.Database, sql: string) => new Promise<void>((resolve, reject) => conn.exec(sql, (e) => (e ? reject(e) : resolve())));
const close = (conn: sqlite3.Database) => new Promise<void>((resolve, reject) => conn.close((e) => (e ? reject(e) : resolve())));

describe('prepared statements on the writing connection', () => {
  let dir: string;
  let file: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-stmt-'));
    file = path.join(dir, 'db.sqlite');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when the same statements run again and again, then rows, lastID and changes are those of one-shot calls', async () => {
    const plain = await open(path.join(dir, 'plain.sqlite'));
    const cached = cacheStatements(await open(path.join(dir, 'cached.sqlite')));
    for (const conn of [plain, cached]) await exec(conn, 'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)');
    const script: Array<['all' | 'run', string, unknown[]]> = [];
    for (let i = 0; i < 20; i++) {
      script.push(['run', 'insert into t (name, n) values (?, ?)', [`row${i}`, i]]);
      script.push(['run', 'update t set n = n + ? where n < ?', [1, i]]);
      script.push(['all', 'select id, name, n from t where n >= ? order by id', [i - 3]]);
      script.push(['all', 'BEGIN;', []]);
      script.push(['run', 'delete from t where n > ?', [100 + i]]);
      script.push(['all', i % 2 ? 'COMMIT;' : 'ROLLBACK', []]);
    }
    for (const [method, sql, bindings] of script) {
      const [a, b] = [await call(plain, method, sql, bindings), await call(cached, method, sql, bindings)];
      assert.deepEqual(b.error, a.error, sql);
      assert.deepEqual(b.rows, a.rows, sql);
      if (method === 'run') assert.deepEqual([b.lastID, b.changes], [a.lastID, a.changes], sql);
    }
    await close(plain);
    await close(cached); // with every statement still prepared: finalized first
  });

  it('when a statement cannot be prepared or breaks a constraint, then its caller gets the error and the connection goes on', async () => {
    const conn = cacheStatements(await open(file));
    await exec(conn, 'CREATE TABLE u (id TEXT PRIMARY KEY)');
    const broken = await call(conn, 'all', 'select nope from nowhere where x = ?', [1]);
    assert.match(String(broken.error), /no such table/);
    const again = await call(conn, 'all', 'select nope from nowhere where x = ?', [1]);
    assert.match(String(again.error), /no such table/, 'a failed prepare is not kept');
    assert.equal((await call(conn, 'run', 'insert into u (id) values (?)', ['a'])).error, null);
    assert.match(String((await call(conn, 'run', 'insert into u (id) values (?)', ['a'])).error), /SQLITE_CONSTRAINT/);
    assert.equal((await call(conn, 'run', 'insert into u (id) values (?)', ['b'])).changes, 1);
    assert.deepEqual((await call(conn, 'all', 'select id from u order by id')).rows, [{ id: 'a' }, { id: 'b' }]);
    await close(conn);
  });

  it('when a write in a transaction is refused as busy, then the rollback ends it and the retried transaction commits', async () => {
    const holder = await open(file);
    const conn = cacheStatements(await open(file));
    for (const c of [holder, conn]) await exec(c, 'PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 0');
    await exec(holder, 'CREATE TABLE IF NOT EXISTS v (n INTEGER)');
    // knex's shape of a transaction: BEGIN (deferred), a read, then the write.
    const attempt = async (n: number) => {
      for (const [method, sql, bindings] of [
        ['all', 'BEGIN;', []],
        ['all', 'select count(*) as c from v', []],
        ['run', 'insert into v (n) values (?)', [n]],
        ['all', 'COMMIT;', []],
      ] as const) {
        const result = await call(conn, method, sql, [...bindings]);
        if (result.error) {
          await call(conn, 'all', 'ROLLBACK', []);
          return result.error;
        }
      }
      return null;
    };
    await exec(holder, 'BEGIN IMMEDIATE; INSERT INTO v (n) VALUES (1)');
    assert.match(String(await attempt(2)), /SQLITE_BUSY/);
    await exec(holder, 'COMMIT');
    // Were the busy insert left un-reset, it would still be running: the ROLLBACK would be refused,
    // the connection would stay in the old transaction, and every retry would fail.
    assert.equal(await attempt(3), null);
    assert.deepEqual((await call(conn, 'all', 'select n from v order by n')).rows, [{ n: 1 }, { n: 3 }]);
    await close(holder);
    await close(conn);
  });

  it('when more distinct statements run than are kept, then the oldest are finalized and every one still answers', async () => {
    const conn = cacheStatements(await open(path.join(dir, 'many.sqlite')));
    const answers = await Promise.all(Array.from({ length: 600 }, (_, i) => call(conn, 'all', `select ${i} as n where ? = ?`, [i % 7, i % 7])));
    assert.deepEqual(
      answers.map((a) => (a.rows as Array<{ n: number }>)[0].n),
      Array.from({ length: 600 }, (_, i) => i),
    );
    assert.equal((await call(conn, 'all', 'select 5 as n where ? = ?', [1, 1])).error, null);
    await close(conn);
  });

  it('when more distinct statements run than are kept, then the least recently used goes and one used all along stays prepared', async () => {
    const raw = await open(path.join(dir, 'recency.sqlite'));
    const prepares = new Map<string, number>();
    const prepare = raw.prepare.bind(raw);
    raw.prepare = ((sql: string, ...rest: never[]) => {
      prepares.set(sql, (prepares.get(sql) ?? 0) + 1);
      return prepare(sql, ...rest);
    }) as typeof raw.prepare;
    const conn = cacheStatements(raw);
    const [kept, once] = ['select 1 as n where ? = ?', 'select 2 as n where ? = ?'];
    await call(conn, 'all', kept, [1, 1]);
    await call(conn, 'all', once, [1, 1]);
    for (let i = 0; i < 300; i++) {
      await call(conn, 'all', `select ${i + 10} as n where ? = ?`, [1, 1]);
      if (i % 10 === 0) await call(conn, 'all', kept, [1, 1]);
    }
    assert.deepEqual((await call(conn, 'all', kept, [1, 1])).rows, [{ n: 1 }]);
    assert.deepEqual((await call(conn, 'all', once, [1, 1])).rows, [{ n: 2 }]);
    assert.equal(prepares.get(kept), 1, 'used all along: prepared once');
    assert.equal(prepares.get(once), 2, 'used once, then evicted: prepared again');
    await close(conn);
  });

  it('when writes wait, then the next statement of any kind sees them, a ROLLBACK drops them, and flushDeferred sends them', async () => {
    const conn = cacheStatements(await open(path.join(dir, 'deferred.sqlite')));
    await exec(conn, 'CREATE TABLE w (n INTEGER PRIMARY KEY, t TEXT)');
    await call(conn, 'run', 'BEGIN');
    conn.defer("INSERT INTO w (n, t) VALUES (1, 'a')");
    conn.defer("INSERT INTO w (n, t) VALUES (2, 'b')");
    assert.deepEqual((await call(conn, 'all', 'select n from w order by n')).rows, [{ n: 1 }, { n: 2 }]);
    conn.defer("INSERT INTO w (n, t) VALUES (3, 'c')");
    assert.equal((await call(conn, 'run', 'ROLLBACK')).error, null);
    assert.deepEqual((await call(conn, 'all', 'select n from w')).rows, []);
    await call(conn, 'run', 'BEGIN');
    conn.defer("INSERT INTO w (n, t) VALUES (4, 'd')");
    await new Promise<void>((resolve, reject) => conn.flushDeferred((e) => (e ? reject(e) : resolve())));
    await call(conn, 'run', 'COMMIT');
    assert.deepEqual((await call(conn, 'all', 'select n, t from w')).rows, [{ n: 4, t: 'd' }]);
    await close(conn);
  });

  it('when a waiting write fails, then the statement behind it is not run and hears its error, and a COMMIT behind it rolls the transaction back', async () => {
    const conn = cacheStatements(await open(path.join(dir, 'deferred-fail.sqlite')));
    await exec(conn, 'CREATE TABLE u (n INTEGER PRIMARY KEY)');
    await call(conn, 'run', 'BEGIN');
    conn.defer('INSERT INTO u (n) VALUES (1)');
    conn.defer('INSERT INTO u (n) VALUES (1)'); // the primary key refuses the second
    const behind = await call(conn, 'run', 'INSERT INTO u (n) VALUES (2)');
    assert.match(String(behind.error), /UNIQUE constraint failed/);
    assert.equal((await call(conn, 'run', 'ROLLBACK')).error, null);
    await call(conn, 'run', 'BEGIN');
    conn.defer('INSERT INTO u (n) VALUES (5)');
    conn.defer('INSERT INTO u (n) VALUES (5)');
    assert.match(String((await call(conn, 'run', 'COMMIT')).error), /UNIQUE constraint failed/);
    // Nothing of that transaction was committed, and the connection is out of it: a new one begins.
    assert.equal((await call(conn, 'run', 'BEGIN')).error, null);
    assert.equal((await call(conn, 'run', 'COMMIT')).error, null);
    assert.deepEqual((await call(conn, 'all', 'select n from u')).rows, []);
    await close(conn);
  });

  it('when a transaction begins, then its BEGIN waits for what comes next: it leaves with the first waiting write in one exec, and a transaction that sent nothing ends with no round trip', async () => {
    const raw = await open(path.join(dir, 'held-begin.sqlite'));
    await exec(raw, 'CREATE TABLE h (n INTEGER PRIMARY KEY)');
    const execs: string[] = [];
    const rawExec = raw.exec.bind(raw);
    raw.exec = (sql: string, callback?: (error: Error | null) => void) => (execs.push(sql), rawExec(sql, callback));
    const conn = cacheStatements(raw);
    const flushed = () => new Promise<Error | null>((resolve) => conn.flushDeferred(resolve));

    assert.equal((await call(conn, 'all', 'BEGIN;')).error, null);
    conn.defer('INSERT INTO h (n) VALUES (1)');
    assert.equal(await flushed(), null);
    assert.equal(execs.length, 1, 'BEGIN and the write in one exec');
    assert.match(execs[0]!, /^BEGIN;[\s\S]*INSERT INTO h/);
    assert.deepEqual((await call(conn, 'all', 'select n from h')).rows, [{ n: 1 }]);
    assert.equal((await call(conn, 'run', 'ROLLBACK')).error, null, 'the BEGIN ran: there is a transaction to roll back');
    assert.deepEqual((await call(conn, 'all', 'select n from h')).rows, []);

    // Nothing sent: BEGIN then ROLLBACK or COMMIT reach no thread, and the connection is in no transaction after.
    execs.length = 0;
    for (const end of ['ROLLBACK', 'COMMIT;']) {
      assert.equal((await call(conn, 'all', 'BEGIN;')).error, null);
      conn.defer('INSERT INTO h (n) VALUES (2)');
      if (end === 'COMMIT;') await call(conn, 'all', 'select 1'); // sends BEGIN and the write: the COMMIT is then a real one
      assert.equal((await call(conn, 'run', end)).error, null);
      assert.equal((await call(conn, 'all', 'BEGIN;')).error, null);
      assert.equal((await call(conn, 'run', 'ROLLBACK')).error, null);
    }
    assert.equal(execs.length, 1, execs.join('\n'));
    assert.match(String((await call(conn, 'run', 'ROLLBACK')).error), /no transaction is active/);
    assert.deepEqual((await call(conn, 'all', 'select n from h')).rows, [{ n: 2 }]);

    // A write sent with the held BEGIN that fails: its caller hears it, and the BEGIN ran, so the transaction rolls back.
    assert.equal((await call(conn, 'all', 'BEGIN;')).error, null);
    conn.defer('INSERT INTO h (n) VALUES (3)');
    conn.defer('INSERT INTO h (n) VALUES (2)'); // the primary key refuses it
    assert.match(String(await flushed()), /UNIQUE constraint failed/);
    assert.equal((await call(conn, 'run', 'ROLLBACK')).error, null);
    assert.deepEqual((await call(conn, 'all', 'select n from h')).rows, [{ n: 2 }]);
    await close(conn);
  });

  it('when any string, whole number or null is written in as a literal, then it reads back exactly as the same value bound', async () => {
    const conn = cacheStatements(await open(path.join(dir, 'literals.sqlite')));
    await exec(conn, 'CREATE TABLE l (id INTEGER PRIMARY KEY, t TEXT, i INTEGER, x)');
    let id = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom("it's", '"', '?', '\u0000a\u0000', '')),
        fc.oneof(fc.maxSafeInteger(), fc.constant(null)),
        async (text, whole) => {
          const [a, b] = [++id, ++id];
          await call(conn, 'run', 'INSERT INTO l (id, t, i, x) VALUES (?, ?, ?, ?)', [a, text, whole, text]);
          conn.defer(`INSERT INTO l (id, t, i, x) VALUES (${b}, ${sqliteLiteral(text)}, ${sqliteLiteral(whole)}, ${sqliteLiteral(text)})`);
          const rows = (await call(conn, 'all', 'select t, i, x, typeof(t) tt, typeof(x) tx from l where id in (?, ?) order by id', [a, b])).rows as unknown[];
          assert.deepEqual(rows[1], rows[0]);
        },
      ),
      { numRuns: 300 },
    );
    assert.equal(sqliteLiteral(0.5), undefined, 'a fraction is not written in');
    assert.equal(sqliteLiteral({}), undefined);
    await close(conn);
  });
});
