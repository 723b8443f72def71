/**
 * Admission limits at the real server: request rates per key and per account
 * (media and text apart) and the cap on an account's queued media tasks refuse
 * with 503 TEMPORARILY_UNAVAILABLE and Retry-After before anything is claimed
 * or reserved, so the same Idempotency-Key succeeds later; the rate is held in
 * the database, so two instances on one database share it. And every 503 the
 * API answers carries Retry-After, a database outage's included.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, tempDataDir } from './helpers/server.ts';
import { submit } from './helpers/tasks.ts';
import { ManualClock, openTestDb } from './helpers/db.ts';
import { dbOptionsFor } from './helpers/database.ts';
import { openDb } from '../server/storage/db.ts';
import * as ledger from '../server/domain/ledger.ts';
import * as accounts from '../server/domain/accounts.ts';
import { systemClock } from '../server/domain/clock.ts';
import { takeTokens } from '../server/storage/rate-buckets.ts';

const IMAGE = '/api/generate/image';
const CHAT = '/api/generate/text/v1/chat/completions';
const image = (prompt: string) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });

describe('admission limits', () => {
  it('when a key goes over its media rate, then 503 TEMPORARILY_UNAVAILABLE with Retry-After, nothing is claimed or reserved, and the same identity succeeds once the bucket refills', async () => {
    const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
    const s = await startTestServer({ clock, env: { WORKER_ENABLED: 'false', KEY_MEDIA_RATE: '1', RATE_BURST_SECONDS: '2' } });
    try {
      const user = await s.user({ gems: 100, llmAllowance: 1000 });
      assert.equal((await submit(s, user.secret, IMAGE, image('one'))).status, 202);
      assert.equal((await submit(s, user.secret, IMAGE, image('two'))).status, 202);
      const balance = await ledger.balanceOf(s.db, user.accountId);
      const refused = await submit(s, user.secret, IMAGE, image('three'));
      assert.equal(refused.status, 503);
      assert.equal(refused.body.error.code, 'TEMPORARILY_UNAVAILABLE');
      assert.match(refused.body.error.message, /API key is over its media request rate \(1 per second\)/);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal(await ledger.balanceOf(s.db, user.accountId), balance, 'nothing was reserved');
      assert.equal((await s.db('idempotency_records').where({ idem_key: refused.idemKey })).length, 0, 'the identity was not claimed');
      // Text is counted apart: the media bucket being empty refuses no chat completion.
      const chat = await submit(s, user.secret, CHAT, { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(chat.status, 200, JSON.stringify(chat.body));
      clock.advance(1000);
      const again = await submit(s, user.secret, IMAGE, image('three'), refused.idemKey);
      assert.equal(again.status, 202, 'the same identity is a new submission once a token is back');
      assert.equal(again.body.created, true);
    } finally {
      await s.close();
    }
  });

  it('when a key goes over its text rate, then replays of a completed chat still answer and spend no token, and the new one past the rate gets 503 naming the text rate with nothing claimed or reserved, and succeeds once the bucket refills', async () => {
    const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
    const s = await startTestServer({ clock, env: { WORKER_ENABLED: 'false', KEY_TEXT_RATE: '1', RATE_BURST_SECONDS: '2' } });
    try {
      const user = await s.user({ llmAllowance: 1000 });
      const chat = (content: string) => ({ model: 'gemforge-text-1', messages: [{ role: 'user', content }] });
      const first = await submit(s, user.secret, CHAT, chat('one'));
      assert.equal(first.status, 200, JSON.stringify(first.body));
      for (let i = 0; i < 3; i++) {
        const replay = await submit(s, user.secret, CHAT, chat('one'), first.idemKey);
        assert.equal(replay.status, 200, JSON.stringify(replay.body));
        assert.equal(replay.body.id, first.body.id, 'the retained completion');
      }
      // The burst of 2 still holds its second token: the replays took none.
      assert.equal((await submit(s, user.secret, CHAT, chat('two'))).status, 200);
      const summary = await ledger.accountSummary(s.db, clock, user.accountId, [user.keyId]);
      const refused = await submit(s, user.secret, CHAT, chat('three'));
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, 'TEMPORARILY_UNAVAILABLE');
      assert.match(refused.body.error.message, /API key is over its text request rate \(1 per second\)/);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.deepEqual(await ledger.accountSummary(s.db, clock, user.accountId, [user.keyId]), summary, 'nothing was reserved');
      assert.equal((await s.db('idempotency_records').where({ idem_key: refused.idemKey })).length, 0, 'the identity was not claimed');
      // A replay is never refused by a rate.
      assert.equal((await submit(s, user.secret, CHAT, chat('one'), first.idemKey)).status, 200);
      clock.advance(1000);
      const again = await submit(s, user.secret, CHAT, chat('three'), refused.idemKey);
      assert.equal(again.status, 200, 'the same identity is a new completion once a token is back');
      assert.notEqual(again.body.id, first.body.id);
    } finally {
      await s.close();
    }
  });

  it("when an account reaches its queued media task cap, then a submission is refused with Retry-After until the operator raises the account's own cap", async () => {
    const s = await startTestServer({ env: { WORKER_ENABLED: 'false', ACCOUNT_QUEUED_TASKS: '2' } });
    try {
      const user = await s.user({ gems: 100 });
      for (const p of ['a', 'b']) assert.equal((await submit(s, user.secret, IMAGE, image(p))).status, 202);
      const refused = await submit(s, user.secret, IMAGE, image('c'));
      assert.equal(refused.status, 503);
      assert.equal(refused.body.error.code, 'TEMPORARILY_UNAVAILABLE');
      assert.match(refused.body.error.message, /already has 2 media tasks queued/);
      assert.equal(refused.headers.get('retry-after'), '5');
      await accounts.updateAccount(s.db, systemClock, user.accountId, { queuedTasks: 3 });
      assert.equal((await submit(s, user.secret, IMAGE, image('c'), refused.idemKey)).status, 202);
    } finally {
      await s.close();
    }
  });

  it('when an account at its queued cap keeps submitting, then the refusals spend no tokens: raised, the cap admits the rest of the burst, then the rate refuses', async () => {
    const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
    const s = await startTestServer({ clock, env: { WORKER_ENABLED: 'false', ACCOUNT_QUEUED_TASKS: '1', KEY_MEDIA_RATE: '1', RATE_BURST_SECONDS: '2' } });
    try {
      const user = await s.user({ gems: 100 });
      assert.equal((await submit(s, user.secret, IMAGE, image('a'))).status, 202);
      for (const p of ['b', 'c', 'd']) {
        const refused = await submit(s, user.secret, IMAGE, image(p));
        assert.equal(refused.status, 503);
        assert.match(refused.body.error.message, /already has 1 media tasks queued/);
        assert.equal(refused.headers.get('retry-after'), '5');
      }
      await accounts.updateAccount(s.db, systemClock, user.accountId, { queuedTasks: 10 });
      assert.equal((await submit(s, user.secret, IMAGE, image('b'))).status, 202, 'the burst of 2 still holds its second token');
      const over = await submit(s, user.secret, IMAGE, image('e'));
      assert.equal(over.status, 503);
      assert.match(over.body.error.message, /API key is over its media request rate/);
    } finally {
      await s.close();
    }
  });

  it("when the account's bucket refuses a submission, then the key's bucket still gave its token", async () => {
    const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
    // Bursts of one second: the key holds 2 tokens, the account 1.
    const s = await startTestServer({ clock, env: { WORKER_ENABLED: 'false', KEY_MEDIA_RATE: '2', ACCOUNT_MEDIA_RATE: '1', RATE_BURST_SECONDS: '1' } });
    try {
      const user = await s.user({ gems: 100 });
      assert.equal((await submit(s, user.secret, IMAGE, image('one'))).status, 202);
      const refused = await submit(s, user.secret, IMAGE, image('two'));
      assert.equal(refused.status, 503);
      assert.match(refused.body.error.message, /This account is over its media request rate \(1 per second\)/);
      assert.equal((await s.db('idempotency_records').where({ idem_key: refused.idemKey })).length, 0, 'the identity was not claimed');
      const tokens = async (id: string) => Number((await s.db('rate_buckets').where({ id }).first('tokens'))?.tokens);
      assert.equal(await tokens(`key:${user.keyId}:media`), 0, "the refused attempt spent the key's second token");
      assert.equal(await tokens(`account:${user.accountId}:media`), 0);
    } finally {
      await s.close();
    }
  });

  it('when a claimed identity is sent again, then the replay is counted against the rate like any submission', async () => {
    const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
    const s = await startTestServer({ clock, env: { WORKER_ENABLED: 'false', KEY_MEDIA_RATE: '1', RATE_BURST_SECONDS: '2' } });
    try {
      const user = await s.user({ gems: 100 });
      const first = await submit(s, user.secret, IMAGE, image('one'));
      assert.equal(first.status, 202);
      const replay = await submit(s, user.secret, IMAGE, image('one'), first.idemKey);
      assert.equal(replay.status, 200);
      assert.equal(replay.body.created, false, 'answered from the claimed record');
      const next = await submit(s, user.secret, IMAGE, image('two'));
      assert.equal(next.status, 503, 'the replay took the burst of 2 its second token');
      assert.match(next.body.error.message, /API key is over its media request rate/);
    } finally {
      await s.close();
    }
  });

  it('when a submission is refused, then /metrics counts the refusal by limit and kind, and shows the accounts waiting per lane', async () => {
    const token = 'metrics-token-metrics-token';
    const s = await startTestServer({ env: { WORKER_ENABLED: 'false', METRICS_TOKEN: token, KEY_MEDIA_RATE: '1', RATE_BURST_SECONDS: '1' } });
    try {
      const user = await s.user({ gems: 100 });
      assert.equal((await submit(s, user.secret, IMAGE, image('one'))).status, 202);
      assert.equal((await submit(s, user.secret, IMAGE, image('two'))).status, 503);
      const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
      assert.match(text, /gemforge_admission_refusals_total\{limit="key-rate",kind="media"\} [1-9]/);
      assert.match(text, /gemforge_queue_accounts_waiting\{lane="local"\} 1/);
    } finally {
      await s.close();
    }
  });

  it('when two API instances share one database, then a bucket admits its burst once between them', async () => {
    const t = await openTestDb();
    const other = await openDb(await dbOptionsFor(t.dir));
    try {
      const bucket = { id: 'key:k1:media', rate: 1, burst: 5 };
      const now = Date.parse('2026-03-01T00:00:00Z');
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => takeTokens(i % 2 ? other : t.db, [bucket], now)));
      assert.equal(results.filter((r) => r.length === 0).length, 5);
      const waits = results.filter((r) => r.length > 0).map((r) => r[0]!.waitMs);
      assert.ok(
        waits.every((w) => w > 0 && w <= 1000),
        waits.join(','),
      );
      assert.deepEqual(await takeTokens(t.db, [bucket], now + 1000), [], 'a second later one token is back');
    } finally {
      await other.destroy();
      await t.close();
    }
  });

  it('when the database fails under a request, then its 503 carries Retry-After', async () => {
    const dataDir = tempDataDir();
    const s = await startTestServer({ dataDir });
    const user = await s.user();
    const { invalidatePrincipals } = await import('../server/domain/principal-cache.ts');
    invalidatePrincipals();
    await s.db.destroy(); // the key cannot be read any more
    try {
      const res = await s.call('GET', '/api/generate/models', { key: user.secret });
      assert.equal(res.status, 503);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'TEMPORARILY_UNAVAILABLE');
      assert.equal(res.headers.get('retry-after'), '1');
    } finally {
      await s.close().catch(() => undefined);
    }
  });
});
