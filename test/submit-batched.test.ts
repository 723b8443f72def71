/**
 * One account's media submissions that arrive while its call is in flight go as one batched call
 * on Postgres (storage/procedure-batches.ts, migration 025): one transaction, each item in its own
 * subtransaction, in arrival order. Each must answer and write exactly what it would alone: the same
 * rows as the same submissions made one at a time, a balance or a key's cap covering only some of
 * them refusing exactly the rest with the spec's status and code, and a second item with the same
 * Idempotency-Key answering as a concurrent duplicate does. On Postgres the first call is held until
 * the others wait behind it, so the batch is certain; on SQLite (no batches: its writer is one
 * connection) the same submissions run concurrently and must answer the same.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { tableRows } from './helpers/table-rows.ts';
import { submit } from './helpers/tasks.ts';
import { databaseFaults } from '../server/storage/engine/query.ts';
import { isSqlite } from '../server/storage/db.ts';
import { IN_FLIGHT, waitingCalls } from '../server/storage/procedure-batches.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';

/** The single call's statement name and the batched call's (storage/procedures.ts). */
const ONE = 'submit-media';
const MANY = 'submit-media-batch';
const NOT_COMPARED = new Set(['api_keys']);
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const IMAGE = '/api/generate/image';
const image = { model: 'gemforge-image-1', prompt: 'a lighthouse at dusk', parameters: { outputCount: 1, resolution: '512' } };

describe('one account’s submissions in one batched call', () => {
  let s: TestServer;
  let postgres = false;
  let ran: string[] = [];
  /** While set, every single call waits for it (Postgres), counted in `held`: the calls arriving meanwhile wait behind them. */
  let gate: Promise<void> | undefined;
  let held = 0;
  before(async () => {
    s = await startTestServer({ env: { WORKER_ENABLED: 'false' } });
    postgres = !isSqlite(s.db);
    databaseFaults.statement = async (name) => {
      ran.push(name);
      if (name === ONE && gate) {
        held++;
        await gate;
      }
    };
  });
  after(async () => {
    databaseFaults.statement = undefined;
    await s.close();
  });

  /**
   * Submits `keys.length` images for `secret` at once, one per Idempotency-Key, in order. On Postgres the first
   * IN_FLIGHT go alone and are held until the rest wait behind them, so the rest go as one batch (checked);
   * answers in the keys' order.
   */
  async function together(secret: string, keys: string[]): Promise<Array<{ status: number; body: any }>> {
    ran = [];
    held = 0;
    let release = () => {};
    if (postgres) gate = new Promise<void>((resolve) => (release = resolve));
    const answers: Array<Promise<{ status: number; body: any }>> = [];
    for (const key of keys) {
      answers.push(submit(s, secret, IMAGE, image, key));
      // The first ones are those held (each single call waits at the gate) before the next is sent.
      if (postgres && answers.length <= IN_FLIGHT) await until(() => held === answers.length, `submission ${answers.length} reached its call`);
    }
    if (postgres) {
      await until(() => waitingCalls(s.db) === keys.length - IN_FLIGHT, `the ${keys.length - IN_FLIGHT} others waited behind the first`);
      gate = undefined;
      release();
    }
    const out = await Promise.all(answers);
    if (postgres) assert.equal(ran.filter((n) => n === MANY).length, 1, `one batched call: ${ran.join(', ')}`);
    return out;
  }

  async function until(done: () => boolean, what: string): Promise<void> {
    for (let i = 0; !done(); i++) {
      assert.ok(i < 2000, `waited too long until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Every row added or removed by `act`, ids of `ids` and times, row ids, turns and tokens blanked, sorted. */
  async function changes(act: () => Promise<string[]>): Promise<string[]> {
    const before = await tableRows(s.db, NOT_COMPARED);
    const ids = await act();
    const after = await tableRows(s.db, NOT_COMPARED);
    const name = (row: string) => {
      let text = row.replace(TIME, '<time>');
      for (const id of ids) text = text.replaceAll(id, '<id>');
      return text.replace(/"(id|turn|tokens|at_ms)":"?[\d.e+-]+"?/g, '"$1":"<$1>"');
    };
    const out: string[] = [];
    for (const [table, now] of after) {
      const was = new Set(before.get(table) ?? []);
      const is = new Set(now);
      for (const r of now) if (!was.has(r)) out.push(`${table} + ${name(r)}`);
      for (const r of was) if (!is.has(r)) out.push(`${table} - ${name(r)}`);
    }
    return out.sort();
  }

  /** The ids a user's submissions made (account, key, tasks, reservations), to blank in its rows. */
  async function idsOf(u: { accountId: string; keyId: string }): Promise<string[]> {
    const records = (await s.db('idempotency_records').where({ key_id: u.keyId }).select('ref', 'reservation_id')) as Array<{
      ref: string | null;
      reservation_id: string | null;
    }>;
    return [u.accountId, u.keyId, ...records.flatMap((r) => [r.ref ?? '', r.reservation_id ?? ''].filter(Boolean))];
  }

  async function quote(): Promise<number> {
    const u = await s.user();
    const answer = await submit(s, u.secret, IMAGE, image);
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    return answer.body.task.quotedGems as number;
  }

  async function ledgerClean(): Promise<void> {
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
  }

  it('when submissions of one account arrive while its call is in flight, then they write the same rows as the same submissions made one at a time', async () => {
    const keys = ['b-0', 'b-1', 'b-2', 'b-3', 'b-4', 'b-5'];
    const batched = await s.user();
    const atOnce = await changes(async () => {
      const answers = await together(batched.secret, keys);
      assert.deepEqual(
        answers.map((a) => a.status),
        keys.map(() => 202),
        JSON.stringify(answers.map((a) => a.body)),
      );
      return idsOf(batched);
    });
    const alone = await s.user();
    ran = [];
    const oneByOne = await changes(async () => {
      for (const key of keys) assert.equal((await submit(s, alone.secret, IMAGE, image, key)).status, 202);
      return idsOf(alone);
    });
    assert.ok(!ran.includes(MANY), `one at a time, no batch: ${ran.join(', ')}`);
    assert.ok(atOnce.filter((c) => c.startsWith('tasks +')).length === keys.length, atOnce.join('\n'));
    assert.deepEqual(atOnce, oneByOne);
    await ledgerClean();
  });

  it('when the balance covers only some of one account’s concurrent submissions, then exactly those succeed, the rest answer 402 INSUFFICIENT_GEMS and the ledger verifies', async () => {
    const price = await quote();
    const u = await s.user({ gems: 3 * price + price - 1 });
    const answers = await together(
      u.secret,
      Array.from({ length: 8 }, (_, i) => `short-${i}`),
    );
    const statuses = answers.map((a) => a.status);
    assert.equal(statuses.filter((x) => x === 202).length, 3, JSON.stringify(statuses));
    for (const a of answers.filter((x) => x.status !== 202)) {
      assert.equal(a.status, 402, JSON.stringify(a.body));
      assert.equal(a.body.error.code, 'INSUFFICIENT_GEMS', JSON.stringify(a.body));
    }
    const balance = (await s.db('account_balances').where({ account_id: u.accountId }).first()) as { paid_pending: number | string };
    assert.equal(Number(balance.paid_pending), 3 * price);
    assert.equal((await s.db('tasks').where({ account_id: u.accountId }).count({ n: '*' }))[0]!.n, 3);
    await ledgerClean();
  });

  it('when the key’s monthly cap covers only some of its concurrent submissions, then exactly those succeed and the rest answer 402 API_KEY_LIMIT', async () => {
    const price = await quote();
    const u = await s.user({ cap: 2 * price });
    const answers = await together(
      u.secret,
      Array.from({ length: 5 }, (_, i) => `capped-${i}`),
    );
    assert.equal(answers.filter((a) => a.status === 202).length, 2, JSON.stringify(answers.map((a) => a.status)));
    for (const a of answers.filter((x) => x.status !== 202)) {
      assert.equal(a.status, 402, JSON.stringify(a.body));
      assert.equal(a.body.error.code, 'API_KEY_LIMIT', JSON.stringify(a.body));
    }
    await ledgerClean();
  });

  it('when two submissions with one Idempotency-Key go in one batch, then one task is made and the second answers it as a concurrent duplicate does', async () => {
    const u = await s.user();
    const answers = await together(u.secret, ['lead', 'second', 'dup', 'dup', 'after']);
    for (const i of [0, 1, 4]) assert.equal(answers[i]!.status, 202, JSON.stringify(answers[i]!.body));
    const [first, second] = [answers[2]!, answers[3]!];
    assert.deepEqual([first.status, second.status].sort(), [200, 202], JSON.stringify([first.body, second.body]));
    assert.equal(first.body.task.id, second.body.task.id);
    const replayed = first.status === 200 ? first : second;
    assert.equal(replayed.body.created, false, JSON.stringify(replayed.body));
    assert.equal((await s.db('tasks').where({ account_id: u.accountId }).count({ n: '*' }))[0]!.n, 4);
    const balance = (await s.db('account_balances').where({ account_id: u.accountId }).first()) as { paid_pending: number | string };
    assert.equal(Number(balance.paid_pending), 4 * (answers[0]!.body.task.quotedGems as number));
    await ledgerClean();
  });
});
