/**
 * The writing connection's prepared statements (storage/statement-cache.ts):
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
import { cacheStatements } from '../../server/storage/statement-cache.ts';

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
      for (const [method, sql, bindings] of [['all', 'BEGIN;', []], ['all', 'select count(*) as c from v', []], ['run', 'insert into v (n) values (?)', [n]], ['all', 'COMMIT;', []]] as const) {
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
    assert.deepEqual(answers.map((a) => (a.rows as Array<{ n: number }>)[0].n), Array.from({ length: 600 }, (_, i) => i));
    assert.equal((await call(conn, 'all', 'select 5 as n where ? = ?', [1, 1])).error, null);
    await close(conn);
  });
});
