/**
 * A new media submission written at once (one prepared statement: on SQLite an
 * INSERT into the view `submit_media`, whose trigger makes the writes, migration
 * 021; on Postgres a SELECT of the function `gemforge_submit_media`, migration 024,
 * which takes the admission's tokens too) and the same submission written step by
 * step (the transaction it falls back to) write the same rows: every table the
 * submission changes, the same columns, values and types (SQLite's `quote()` tells
 * 4 from 4.0 and '4'; Postgres's `row_to_json` 4 from '4'), its ids and times
 * aside. Each shape is submitted twice, by two accounts made alike: once as it
 * runs, once with the statement made to fail, which sends it the step-by-step way.
 * A refusal and a replay answer the same and change nothing either way (but the
 * admission's tokens, which count every request).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { tableRows } from './helpers/table-rows.ts';
import { submit } from './helpers/tasks.ts';
import { databaseFaults } from '../server/storage/engine/query.ts';

/** The procedure's statement name (storage/procedures.ts), and the step-by-step claim's. */
const AT_ONCE = 'submit-media';
const CLAIM = 'idempotency-insert';
/** Not the submission's writes: the key's last use, stamped in the background whenever it comes. */
const NOT_COMPARED = new Set(['api_keys']);
/**
 * The admission's token take: on SQLite before either path (apart), on Postgres with the submission's writes,
 * at once or at the commit. Compared on both, but for its tokens and time, which depend on when it ran.
 */
const TOKENS = 'rate_buckets';
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const TOKEN_COUNT = /"(tokens|at_ms)":"?[\d.e+-]+"?/g;

describe('a media submission written at once or step by step', () => {
  let s: TestServer;
  /** The statements run while `forced` names which path, by name. */
  let ran: string[] = [];
  let stepByStep = false;
  before(async () => {
    s = await startTestServer({ env: { WORKER_ENABLED: 'false' } });
    databaseFaults.statement = (name) => {
      ran.push(name);
      if (stepByStep && name === AT_ONCE) throw new Error('made to fail: the submission goes step by step');
    };
  });
  after(async () => {
    databaseFaults.statement = undefined;
    await s.close();
  });

  const rows = () => tableRows(s.db, NOT_COMPARED);

  /** The rows `act` added or removed (a changed row is both), with `ids` named by their role and times, row ids and turns blanked. */
  async function changes(ids: Record<string, string>, act: () => Promise<void>): Promise<string[]> {
    const before = await rows();
    await act();
    const after = await rows();
    const name = (row: string) => {
      let text = row.replace(TIME, '<time>');
      for (const [role, id] of Object.entries(ids)) text = text.replaceAll(id, `<${role}>`);
      // Row ids and the queue's turns count up across the whole database (the second account's come later).
      return text.replace(/"(id|turn)":"?(\d+)"?/g, '"$1":"<$1>"').replace(TOKEN_COUNT, '"$1":"<$1>"');
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

  interface Outcome {
    status: number;
    body: string;
    changes: string[];
    ran: string[];
  }

  /** Submits `body` (after `first`, when given, with the same Idempotency-Key) for a fresh account made by `user`. */
  async function submitted(
    path: string,
    body: object,
    user: { gems?: number; cap?: number },
    options: { replay?: boolean; stepByStep: boolean },
  ): Promise<Outcome> {
    const u = await s.user(user);
    const idemKey = 'at-once-or-step-by-step';
    const ids: Record<string, string> = { account: u.accountId, key: u.keyId };
    if (options.replay) {
      const first = await submit(s, u.secret, path, body, idemKey);
      assert.equal(first.status, 202, JSON.stringify(first.body));
    }
    let answer = { status: 0, body: {} as { task?: { id: string } } };
    ran = [];
    stepByStep = options.stepByStep;
    const changed = await changes(ids, async () => {
      try {
        answer = await submit(s, u.secret, path, body, idemKey);
      } finally {
        stepByStep = false;
      }
    });
    const seen = ran;
    if (answer.body.task) ids.task = answer.body.task.id;
    const reservation = (await s.db('idempotency_records').where({ key_id: u.keyId }).first('reservation_id')) as { reservation_id?: string } | undefined;
    if (reservation?.reservation_id) ids.reservation = reservation.reservation_id;
    const named = (text: string) => Object.entries(ids).reduce((t, [role, id]) => t.replaceAll(id, `<${role}>`), text.replace(TIME, '<time>'));
    return { status: answer.status, body: named(JSON.stringify(answer.body)), changes: changed.map(named), ran: seen };
  }

  /** The shape both ways: the same answer, the same rows changed; `atOnce` says whether the first way wrote it in one statement. */
  async function bothWays(path: string, body: object, user: { gems?: number; cap?: number }, expect: { status: number; atOnce: boolean; replay?: boolean }) {
    const fast = await submitted(path, body, user, { replay: expect.replay, stepByStep: false });
    const slow = await submitted(path, body, user, { replay: expect.replay, stepByStep: true });
    assert.equal(fast.status, expect.status, fast.body);
    assert.equal(slow.status, fast.status, slow.body);
    assert.equal(slow.body, fast.body);
    assert.deepEqual(slow.changes, fast.changes);
    assert.ok(slow.ran.includes(CLAIM), `the fallback claims step by step: ${slow.ran.join(', ')}`);
    if (expect.atOnce) {
      assert.ok(fast.ran.includes(AT_ONCE) && !fast.ran.includes(CLAIM), `written at once: ${fast.ran.join(', ')}`);
      assert.ok(fast.changes.length > 0);
    } else
      assert.deepEqual(
        fast.changes.filter((c) => !c.startsWith(`${TOKENS} `)),
        [],
        'nothing written but the tokens',
      );
    return fast;
  }

  const IMAGE = '/api/generate/image';
  const image = (outputCount: number, extra: object = {}) => ({
    model: 'gemforge-image-1',
    prompt: 'a lighthouse at dusk',
    parameters: { outputCount, resolution: '512' },
    ...extra,
  });

  it('when one to four images are submitted, then both ways write the same claim, hold, reservation, entry, task, outputs, job, queue turn and tokens', async () => {
    for (const count of [1, 2, 3, 4]) {
      const fast = await bothWays(IMAGE, image(count), {}, { status: 202, atOnce: true });
      const tables = new Set(fast.changes.map((c) => c.split(' ')[0]));
      for (const table of [
        'idempotency_records',
        'account_balances',
        'key_balances',
        'reservations',
        'ledger_entries',
        'tasks',
        'task_outputs',
        'jobs',
        'queue_turns',
        TOKENS,
      ]) {
        assert.ok(tables.has(table), `${table} written: ${fast.changes.join('\n')}`);
      }
      assert.equal(fast.changes.filter((c) => c.startsWith('task_outputs +')).length, count);
    }
  });

  it('when the key has a monthly cap, a video and a speech are submitted, then both ways write the same rows', async () => {
    await bothWays(IMAGE, image(2), { cap: 100 }, { status: 202, atOnce: true });
    await bothWays(
      '/api/generate/video',
      { model: 'gemforge-video-lite-1', prompt: 'a paper boat', parameters: { mode: 'text-to-video' } },
      {},
      { status: 202, atOnce: true },
    );
    await bothWays(
      '/api/generate/audio',
      { model: 'gemforge-speech-1', operation: 'speech', prompt: 'Hello there.', parameters: { voiceProfileId: 'voice_216a51c833b48d5464b520f3' } },
      {},
      { status: 202, atOnce: true },
    );
  });

  it('when the account is short of Gems, the key past its cap or the quote over maxGems, then both ways refuse alike and write nothing', async () => {
    const short = await bothWays(IMAGE, image(2), { gems: 1 }, { status: 402, atOnce: false });
    assert.match(short.body, /INSUFFICIENT_GEMS/);
    const capped = await bothWays(IMAGE, image(2), { cap: 1 }, { status: 402, atOnce: false });
    assert.match(capped.body, /API_KEY_LIMIT/);
    // The statement's refusal named its rule: the step-by-step way ran next, once (not the at-commit attempt first).
    for (const refused of [short, capped]) {
      assert.ok(refused.ran.includes(AT_ONCE), refused.ran.join(', '));
      assert.equal(refused.ran.filter((n) => n === CLAIM).length, 1, refused.ran.join(', '));
    }
    const ceiling = await bothWays(IMAGE, image(2, { maxGems: 1 }), {}, { status: 409, atOnce: false });
    assert.match(ceiling.body, /PRICE_CHANGED/);
  });

  it('when a submission is replayed, then both ways answer the first task and write nothing', async () => {
    const replay = await bothWays(IMAGE, image(2), {}, { status: 200, atOnce: false, replay: true });
    assert.match(replay.body, /"created":false/);
  });
});
