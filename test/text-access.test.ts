/**
 * Access ends while a text response is open: "Revocation or expiration
 * stops all access", and revocation "does not cancel provider work already
 * begun". After a revocation (by another process), an expiry or an account
 * block, an open stream ends with an error frame and no `[DONE]` (so before the
 * generation's own end), and a waiting JSON completion answers with the
 * refusal; the generation goes on and settles its measured usage, as when a
 * client disconnects. How soon the watch sees a change (domain/key-watch.ts,
 * a fraction of a second) is a speed, not asserted here: a loaded runner
 * stretches it; the stream ending with the refusal instead of `[DONE]` is the
 * behaviour.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { sseEvents, summarise } from './helpers/sse.ts';
import { changeElsewhere } from './helpers/auth.ts';
import { ManualClock } from './helpers/db.ts';
import { until } from './helpers/poll.ts';
import * as accounts from '../server/domain/accounts.ts';
import type { ReservationRow } from '../server/storage/ledger.ts';

const PATH = '/api/generate/text/v1/chat/completions';
let counter = 0;
const newKey = () => `access-${process.pid}-${++counter}`;
/** At 20 ms a token this answer takes several seconds: long enough to outlive the change. */
const LONG = 'Please restate this sentence back to me slowly, word by word, with every word of it kept in its order and nothing left out.';

describe('access ends during an open text response', () => {
  const clock = new ManualClock(new Date());
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ clock, env: { TEXT_STREAM_DELAY_MS: '20' } });
  });
  after(() => s.close());

  const post = (secret: string, stream: boolean, signal?: AbortSignal) =>
    fetch(new URL(PATH, s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': newKey() },
      body: JSON.stringify({ model: 'gemforge-text-1', messages: [{ role: 'user', content: LONG }], stream }),
      signal,
    });

  async function settled(ref: string): Promise<ReservationRow> {
    return until(`reservation ${ref} to settle`, async () => {
      const row = (await s.db('reservations').where({ ref }).first()) as ReservationRow | undefined;
      return row && row.state !== 'held' && row;
    });
  }

  /**
   * Opens a stream, reads its first chunk, calls `change` and reads the rest;
   * returns what arrived.
   */
  async function streamThrough(secret: string, change: () => Promise<void>) {
    const res = await post(secret, true);
    assert.equal(res.status, 200);
    const data: string[] = [];
    const events = sseEvents(res);
    data.push((await events.next()).value as string);
    await change();
    for await (const d of events) data.push(d);
    const result = summarise(data.map((d) => `data: ${d}\n\n`).join(''), data);
    return { result, id: result.chunks[0]!.id };
  }

  it('when another process revokes the key mid-stream, then the stream ends with INVALID_API_KEY and no [DONE], and the generation settles', async () => {
    const user = await s.user({ llmAllowance: 100 });
    const other = await changeElsewhere(s.dataDir, 'revoke', user.keyId);
    const { result, id } = await streamThrough(user.secret, () => other.go());
    assert.equal(result.done, false, 'no [DONE] after access ended');
    assert.equal(result.error?.code, 'INVALID_API_KEY');
    assert.match(result.error.message, /revoked or expired while this response was open/);
    assert.equal(result.usage, undefined);
    // The provider work goes on and its measured usage is billed, once, within the reservation.
    const row = await settled(id);
    assert.equal(row.state, 'settled');
    const reserved = row.hold_allowance + row.hold_paid;
    assert.ok(row.charged >= 1 && row.charged <= reserved, `charged ${row.charged} of ${reserved}`);
  });

  it('when the key expires mid-stream, then the stream ends with INVALID_API_KEY and no [DONE]', async () => {
    const accountId = await s.account({ llmAllowance: 100 });
    const key = await s.key(accountId, { expiresAt: new Date(clock.now().getTime() + 60_000) });
    const { result, id } = await streamThrough(key.secret, async () => clock.advance(60_000));
    assert.equal(result.done, false);
    assert.equal(result.error?.code, 'INVALID_API_KEY');
    assert.equal((await settled(id)).state, 'settled');
  });

  it('when the account is blocked mid-stream, then the stream ends with ACCOUNT_BLOCKED', async () => {
    const user = await s.user({ llmAllowance: 100 });
    const other = await changeElsewhere(s.dataDir, 'block', user.accountId);
    const { result } = await streamThrough(user.secret, () => other.go());
    assert.equal(result.done, false);
    assert.equal(result.error?.code, 'ACCOUNT_BLOCKED');
  });

  it('when the key is revoked while a JSON completion is being generated, then the answer is 401 INVALID_API_KEY and the generation still settles', async () => {
    const user = await s.user({ llmAllowance: 100 });
    const pending = post(user.secret, false);
    // The completion is admitted once its reservation exists; revoke then.
    const row = await until(
      'the completion admitted',
      async () => (await s.db('reservations').where({ account_id: user.accountId }).first()) as ReservationRow | undefined,
      10_000,
      20,
    );
    await accounts.revokeKey(s.db, clock, user.keyId);
    const e = await errorOf(await pending);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'INVALID_API_KEY');
    assert.match(e.message, /while this response was open/);
    assert.equal((await settled(row.ref!)).state, 'settled');
  });

  it('when the key stays valid, then the stream runs to [DONE] however long it takes', async () => {
    const user = await s.user({ llmAllowance: 100 });
    const { result } = await streamThrough(user.secret, async () => undefined);
    assert.equal(result.error, undefined);
    assert.equal(result.done, true);
    assert.ok(result.usage);
  });
});
