/**
 * Round trips per request: authentication reads a key with its
 * account in one statement, or none while the key is cached; a task read is one
 * statement whatever its outputs; the models list and a missing key need none.
 * A key's last use (the console's "last used") is stamped in the background at
 * most once a minute per key: counted apart from a request's statements.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import sqlite3 from 'sqlite3';
import { startTestServer, tempDataDir, type TestServer } from './helpers/server.ts';
import { dropDatabaseFor } from './helpers/database.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { isSqlite, onStatement } from '../server/storage/db.ts';
import { invalidatePrincipals } from '../server/domain/principal-cache.ts';

describe('statements per request', () => {
  const dataDir = tempDataDir();
  let s: TestServer;
  let user: { secret: string };
  let taskId: string;
  let statements: string[] = [];
  const trips: Array<{ exec: boolean; sql: string }> = [];
  let recording = false;
  const statementProto = sqlite3.Statement.prototype as unknown as Record<
    'run' | 'all',
    (this: sqlite3.Statement & { sql: string }, ...a: unknown[]) => unknown
  >;
  const databaseProto = sqlite3.Database.prototype as unknown as Record<'exec', (this: sqlite3.Database, sql: string, ...a: unknown[]) => unknown>;
  const originals = { run: statementProto.run, all: statementProto.all, exec: databaseProto.exec };
  before(async () => {
    // A task generated to the end by one server; then the one counted, without a polling worker.
    const generating = await startTestServer({ dataDir });
    user = await generating.user();
    const sub = await submit(generating, user.secret, '/api/generate/image', {
      model: 'gemforge-image-1',
      prompt: 'a lighthouse',
      parameters: { outputCount: 2, resolution: '512' },
    });
    assert.equal(sub.status, 202);
    const task = await waitForTask(generating, user.secret, sub.body.task.id);
    assert.equal(task.outputs.filter((o) => o.asset).length, 2);
    taskId = task.id;
    await generating.close();
    // Every call into node-sqlite3 that runs SQL is one round trip to its thread pool: prepared statements' `run` and
    // `all`, and `exec` (the statement cache binds `exec` when a connection opens, so it is recorded from here on).
    for (const method of ['run', 'all'] as const) {
      statementProto[method] = function (...a: unknown[]) {
        if (recording) trips.push({ exec: false, sql: this.sql });
        return originals[method].apply(this, a);
      };
    }
    databaseProto.exec = function (sql: string, ...a: unknown[]) {
      if (recording) trips.push({ exec: true, sql });
      return originals.exec.call(this, sql, ...a);
    };
    s = await startTestServer({ dataDir, env: { WORKER_ENABLED: 'false' } });
    // The URL-signing keys are re-read by a timer (domain/signing-keys.ts), whatever requests come: not a request's statement.
    onStatement(s.db, (sql) => void (SIGNING_KEYS_REFRESH.test(sql) || statements.push(sql)));
  });
  after(async () => {
    await s.close();
    Object.assign(statementProto, { run: originals.run, all: originals.all });
    databaseProto.exec = originals.exec;
    fs.rmSync(dataDir, { recursive: true, force: true });
    await dropDatabaseFor(dataDir);
  });

  /** sqlite3 reports a statement's trace asynchronously: lets those of earlier work arrive first. */
  const settle = () => new Promise((r) => setTimeout(r, 50));

  const LAST_USE = /last_used_at/;
  const SIGNING_KEYS_REFRESH = /\bsigning_keys\b/;

  /** The statements the server ran while answering one request, and the key's last-use stamps apart. */
  async function count(method: string, path: string, key?: string): Promise<{ status: number; statements: string[]; stamps: number }> {
    await settle();
    statements = [];
    const res = await s.call(method, path, { ...(key && { key }) });
    await res.arrayBuffer();
    await settle();
    return { status: res.status, statements: statements.filter((q) => !LAST_USE.test(q)), stamps: statements.filter((q) => LAST_USE.test(q)).length };
  }

  /** Statements that read the key (always with its account, in the same statement) and those that read tasks. */
  const keyReads = (sqls: string[]) => sqls.filter((q) => /api_keys/.test(q));
  const taskReads = (sqls: string[]) => sqls.filter((q) => /\btasks\b/.test(q));

  it('when a task with two generated outputs is read, then it takes one statement, plus one for a key not read in the last moment', async () => {
    invalidatePrincipals(); // any cache entry of the key is stale now (as after PRINCIPAL_TTL_MS)
    for (const method of ['GET', 'HEAD']) {
      const read = await count(method, `/api/generate/tasks/${taskId}`, user.secret);
      assert.equal(read.status, 200);
      assert.equal(taskReads(read.statements).length, 1, read.statements.join('\n'));
      assert.ok(
        keyReads(read.statements).every((q) => /accounts/.test(q)),
        'the key comes with its account',
      );
      assert.equal(read.statements.length, 1 + keyReads(read.statements).length, read.statements.join('\n'));
      assert.ok(keyReads(read.statements).length <= 1);
    }
  });

  it('when a new image is submitted, then admission is one statement (SQLite: first; Postgres: with the rest), the rest is one prepared statement bound with its values and the answer needs no read after it', async () => {
    const body = { model: 'gemforge-image-1', prompt: 'a lighthouse at dusk', parameters: { outputCount: 2, resolution: '512' } };
    await (await s.call('POST', '/api/generate/image', { key: user.secret, body, headers: { 'idempotency-key': 'statements-warm' } })).arrayBuffer();
    await settle();
    const bucket = s.db('rate_buckets').where('id', 'like', 'key:%:media');
    const before = await bucket.clone().first('id', 'at_ms');
    assert.ok(before, 'the warm submission made its key bucket');
    await settle(); // the trace of that read arrives asynchronously: not the counted request's
    statements = [];
    trips.length = 0;
    recording = true;
    let res: Response;
    let answer: { created: boolean; task: { status: string; quotedGems: number; outputs: Array<{ status: string; asset: unknown }> } };
    try {
      res = await s.call('POST', '/api/generate/image', { key: user.secret, body, headers: { 'idempotency-key': 'statements-counted' } });
      answer = (await res.json()) as typeof answer;
      await settle();
    } finally {
      recording = false;
    }
    assert.equal(res.status, 202);
    assert.equal(answer.task.status, 'queued');
    assert.ok(answer.task.quotedGems > 0);
    assert.deepEqual(
      answer.task.outputs.map((o) => [o.status, o.asset]),
      [
        ['pending', null],
        ['pending', null],
      ],
    );
    const traced = statements.filter((q) => !/api_keys/.test(q)); // the key may have been read (cache expiry)
    // SQLite traces the statements a trigger runs as comments, inside the statement that fired it (no round trip of
    // their own): the job's insert makes its account's turn row (migration 017), one insert.
    const all = traced.filter((q) => !q.startsWith('--') && !/gemforge_guards/.test(q));
    assert.ok(traced.filter((q) => /^-- INSERT INTO queue_turns/.test(q)).length <= 1, traced.join('\n'));
    assert.ok(!all.some((q) => /^select .*from .queue_turns./i.test(q)), all.join('\n'));
    // The hold is decided as the submission is written (guards of the moves themselves): the figures are not read.
    assert.deepEqual(
      statements.filter((q) => /^select .*account_balances/i.test(q)),
      [],
    );
    // Admission takes the key's and the account's tokens in one statement that also reads the account's queued jobs
    // from its turn rows (under the cap). SQLite: first, outside the write (so no bucket row is locked while it runs).
    // Postgres: in the submission's own statement, after the hold's guards (rate-buckets.ts `tokensAtOnce`), and
    // the key's bucket was taken from.
    if (!isSqlite(s.db)) {
      const after = await s.db('rate_buckets').where({ id: before.id }).first('at_ms');
      assert.ok(Number(after?.at_ms) > Number(before.at_ms), 'the counted submission took a token of its key');
      // One statement, a named prepared one (parsed once per connection), its values bound: the function of
      // migration 024 makes the claim, the hold, the task, the tokens and the job. No BEGIN, no COMMIT, no read after.
      assert.equal(all.length, 1, all.join('\n'));
      assert.match(all[0]!, /^select gemforge_submit_media\(\$1, \$2, /i, all.join('\n'));
      assert.ok(!all[0]!.includes('statements-counted'), 'the values are bound, not written in');
      return;
    }
    // SQLite: two round trips to node-sqlite3, both prepared statements (compiled once, bound with the values): the
    // admission's take, then the whole submission, the claim, the hold's guarded moves, the reservation, the ledger
    // entry, the task, its outputs and its job, one INSERT into a view whose trigger writes them (migration 021). No
    // `exec` of SQL with the values written in (compiled again for every request), no BEGIN or COMMIT, no read after.
    const mine = trips.filter((c) => !/`key__id`|last_used_at|\bsigning_keys\b|^\s*pragma\b/i.test(c.sql));
    const shown = mine.map((c) => `${c.exec ? 'exec' : 'prepared'}: ${c.sql.replace(/\s+/g, ' ').slice(0, 160)}`).join('\n');
    assert.equal(mine.length, 2, shown);
    assert.ok(
      mine.every((c) => !c.exec),
      shown,
    );
    assert.match(mine[0]!.sql, /^insert into rate_buckets .*from queue_turns/is, shown);
    assert.match(mine[1]!.sql, /^insert into .submit_media. \(/i, shown);
    assert.ok(!mine[1]!.sql.includes('statements-counted') && !mine[1]!.sql.includes(answer.task.status), 'the values are bound, not written in');
  });

  it('when a chat completion is settled, then its reservation is not read back: the settlement closes the hold right after completing the record (SQLite: in one statement)', async () => {
    const rich = await s.user({ llmAllowance: 1000 });
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 };
    await settle();
    statements = [];
    const res = await s.call('POST', '/api/generate/text/v1/chat/completions', { key: rich.secret, body, headers: { 'idempotency-key': 'statements-chat' } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await settle();
    // On SQLite each checked write of a transaction is followed by its guard (migration 020), in the same batch.
    // The batch's statements are traced one by one, each after the `;` that ended the one before.
    const all = statements.map((q) => q.replace(/^[;\s]+/, '')).filter((q) => !q.startsWith('--') && !LAST_USE.test(q) && !/gemforge_guards/.test(q));
    const begins = all.flatMap((q, i) => (q === 'BEGIN;' ? [i] : []));
    if (isSqlite(s.db)) {
      // No transaction at all: the Gems are held by one statement (an INSERT into the view of migration 023), and the
      // settlement is one more (migration 022), whose trigger completes the record, then closes the hold, each
      // guarded. Nothing reads the reservation back.
      assert.deepEqual(begins, [], all.join('\n'));
      const writes = all.filter((q) => !/api_keys/.test(q));
      assert.ok(!writes.some((q) => /^select .* from .reservations./i.test(q)), writes.join('\n'));
      assert.equal(writes.length, 2, writes.join('\n'));
      assert.match(writes[0]!, /^insert into .submit_text./i, writes.join('\n'));
      assert.match(writes[1]!, /^insert into .settle_completion./i, writes.join('\n'));
      return;
    }
    // The second transaction is the settlement (the first holds the Gems).
    assert.equal(begins.length, 2, all.join('\n'));
    const settlement = all.slice(begins[1]);
    assert.ok(!settlement.some((q) => /^select .* from .reservations./i.test(q)), settlement.join('\n'));
    assert.match(settlement[1] ?? '', /^update .idempotency_records./i, settlement.join('\n'));
    assert.match(settlement[2] ?? '', /^update .reservations./i, settlement.join('\n'));
  });

  it('when a chat completion is answered, then it takes two round trips to node-sqlite3, both prepared statements bound with their values: the admission, the claim and the hold as one, the settlement as the other', async (t) => {
    if (!isSqlite(s.db)) return t.skip('on Postgres the writes that wait go with the COMMIT (test/unit/pg-deferred.test.ts)');
    const rich = await s.user({ llmAllowance: 1000 });
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 };
    const answer = async (idemKey: string) => {
      const res = await s.call('POST', '/api/generate/text/v1/chat/completions', { key: rich.secret, body, headers: { 'idempotency-key': idemKey } });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      await settle();
    };
    await answer('statements-chat-warm'); // the key read and its last-use stamp, the balance rows made
    trips.length = 0;
    recording = true;
    try {
      await answer('statements-chat-batched');
    } finally {
      recording = false;
    }
    // The key's read (its cache may have expired) and the WAL checkpoint beside the writer are not the completion's.
    const mine = trips.filter((c) => !/`key__id`|last_used_at|\bsigning_keys\b|^\s*pragma\b/i.test(c.sql));
    const shown = mine.map((c) => `${c.exec ? 'exec' : 'prepared'}: ${c.sql.replace(/\s+/g, ' ').slice(0, 160)}`).join('\n');
    const expected: RegExp[] = [
      // the admission's token take (every bucket gives one), the claim (a claim made before fails here), the hold split
      // between the allowance and paid Gems from the figures, its guarded moves and its entry: one INSERT into a view
      // whose trigger makes them (migration 023), the split read back by its RETURNING; no BEGIN, no read of the
      // figures, no `exec` of SQL with the values written in (compiled again for every request)
      /^insert into .submit_text. \([\s\S]*\) returning /i,
      // the settlement whole, one INSERT into a view whose trigger completes the record and closes the hold, each
      // guarded (a settlement happens once), then makes its writes (migration 022)
      /^insert into .settle_completion. \(/i,
    ];
    assert.equal(mine.length, expected.length, shown);
    expected.forEach((sql, i) => {
      assert.equal(mine[i]!.exec, false, shown);
      assert.match(mine[i]!.sql, sql, shown);
      assert.ok(!mine[i]!.sql.includes('statements-chat-batched') && !mine[i]!.sql.includes('chat.completion'), 'the values are bound, not written in');
    });
  });

  it('when models are listed with a cached key or without a key, then no statement runs', async () => {
    const fresh = await s.user();
    const first = await count('GET', '/api/generate/models', fresh.secret);
    assert.equal(first.status, 200);
    assert.equal(keyReads(first.statements).length, 1, 'the first use reads the key with its account');
    assert.equal(first.statements.length, 1);
    assert.equal(first.stamps, 1, "the first use stamps the key's last use");
    // Right after, the key is cached (for half a second: on a very busy machine one more read may come first).
    const next = [];
    const stamps = [];
    for (let i = 0; i < 3; i++) {
      const again = await count('GET', '/api/generate/models', fresh.secret);
      next.push(again.statements.length);
      stamps.push(again.stamps);
    }
    assert.deepEqual(stamps, [0, 0, 0], 'within the minute the last use is not stamped again');
    assert.ok(next.includes(0), `statements: ${next.join(', ')}`);
    assert.ok(next.every((n) => n <= 1));
    const missing = await count('GET', '/api/generate/models');
    assert.equal(missing.status, 401);
    assert.equal(missing.statements.length, 0);
  });
});
