/**
 * The Postgres connection wrapper of server/storage/engine/pg-deferred.ts against a
 * recording stand-in for node-postgres's Client: what goes to the server in
 * which round trip (the BEGIN held for the first statement, waiting writes with
 * the COMMIT, the hold last), and what a failure leaves behind. The same
 * wrapper against a real Postgres: test/unit/ledger.test.ts and the whole
 * suite under `npm run test:postgres`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { deferringPg, pgLiteral } from '../../server/storage/engine/pg-deferred.ts';

type Callback = (error: Error | null, result?: unknown) => void;

/** A client that records each query it is sent and answers it (failing those that match `failOn`). */
function recorder(failOn?: RegExp) {
  const sent: string[] = [];
  const client = {
    query(config: unknown, values?: unknown, callback?: unknown) {
      const text = typeof config === 'string' ? config : (config as { text: string }).text;
      const cb = (typeof values === 'function' ? values : callback) as Callback;
      sent.push(text);
      const results = text.split(';\n').map((s) => ({ command: s.split(' ')[0]!.toUpperCase(), rows: [{ n: 1 }], rowCount: 1 }));
      setImmediate(() => (failOn?.test(text) ? cb(new Error(`refused: ${text}`)) : cb(null, results.length === 1 ? results[0] : results)));
      return undefined;
    },
  };
  return { sent, conn: deferringPg(client) };
}

/** knex's call shape: `query({ text, values }, callback)`. */
const ask = (conn: { query(c: unknown, cb: unknown): unknown }, text: string, values: unknown[] = []) =>
  new Promise<unknown>((resolve, reject) => conn.query({ text, values }, (error: Error | null, result: unknown) => (error ? reject(error) : resolve(result))));

describe('Postgres writes that wait (pg-deferred.ts)', () => {
  it('when a transaction claims, holds and commits, then the BEGIN goes with the claim and every write, the hold last, with the COMMIT: two round trips', async () => {
    const { sent, conn } = recorder();
    await ask(conn, 'BEGIN;');
    assert.equal(sent.length, 0, 'the BEGIN is held');
    const claim = await conn.runPrepared('gemforge_1', 'insert into t values ($1)', ["'k'"]);
    assert.equal(claim.rowCount, 1);
    await conn.deferPrepared('gemforge_2', 'update b set x = x + $1', ['5'], true);
    await conn.deferPrepared('gemforge_3', 'insert into r values ($1)', ["'r'"]);
    await ask(conn, 'COMMIT;');
    const trips = sent.filter((s) => !s.startsWith('PREPARE'));
    assert.deepEqual(trips, ["BEGIN;\nEXECUTE gemforge_1('k')", "EXECUTE gemforge_3('r');\nEXECUTE gemforge_2(5);\nCOMMIT;"]);
    assert.equal(sent.filter((s) => s.startsWith('PREPARE')).length, 3, 'each statement prepared once');
    await ask(conn, 'BEGIN;');
    await conn.runPrepared('gemforge_1', 'insert into t values ($1)', ["'k2'"]);
    assert.equal(sent.filter((s) => s.startsWith('PREPARE')).length, 3, 'and not again on the same connection');
  });

  it('when a transaction that sent nothing rolls back, then nothing reaches the server; when waiting writes are dropped, then only the ROLLBACK does', async () => {
    const { sent, conn } = recorder();
    await ask(conn, 'BEGIN;');
    await ask(conn, 'ROLLBACK;');
    assert.equal(sent.length, 0);
    await ask(conn, 'BEGIN;');
    await ask(conn, 'select 1', [1]);
    await conn.deferPrepared('gemforge_9', 'insert into r values ($1)', ['1']);
    await ask(conn, 'ROLLBACK;');
    assert.deepEqual(
      sent.filter((s) => !s.startsWith('PREPARE')),
      ['BEGIN', 'select 1', 'ROLLBACK;'],
    );
  });

  it('when the batch with the COMMIT fails, then the COMMIT fails with its error and the connection is rolled back before anyone uses it again', async () => {
    const { sent, conn } = recorder(/EXECUTE gemforge_5/);
    await ask(conn, 'BEGIN;');
    await conn.deferPrepared('gemforge_5', 'update b set x = x + $1', ['1'], true);
    await assert.rejects(ask(conn, 'COMMIT;'), /refused/);
    assert.equal(sent.at(-1), 'ROLLBACK');
  });

  it('when a statement with bound values comes while writes wait, then the writes go first as a query of their own and the statement after them', async () => {
    const { sent, conn } = recorder();
    await ask(conn, 'BEGIN;');
    await conn.deferPrepared('gemforge_6', 'insert into r values ($1)', ['1']);
    await ask(conn, 'select * from r where id = $1', [1]);
    assert.deepEqual(
      sent.filter((s) => !s.startsWith('PREPARE')),
      ['BEGIN;\nEXECUTE gemforge_6(1)', 'select * from r where id = $1'],
    );
  });

  it('when values are written in as literals, then text is quoted (backslashes in an E string), whole numbers are digits, and what has no literal is refused', () => {
    assert.equal(pgLiteral("it's"), "'it''s'");
    assert.equal(pgLiteral('a\\b')?.trim(), "E'a\\\\b'");
    assert.equal(pgLiteral(42), '42');
    assert.equal(pgLiteral(null), 'NULL');
    assert.equal(pgLiteral(true), 'TRUE');
    assert.equal(pgLiteral(1.5), undefined);
    assert.equal(pgLiteral('nul\0'), undefined);
  });
});
