/**
 * Long texts moderated off the event loop at the real server
 * (server/providers/moderation/off-thread.ts): their decisions reach the client
 * as the in-process judge's would; past the moderation threads and their queue a
 * request is refused with 503 TEMPORARILY_UNAVAILABLE and Retry-After, nothing
 * reserved, and its identity is free for the retry; the threads end with the
 * server on SIGTERM.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { childServers, seedUserOnDisk } from './helpers/child.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';
import { hostilePrompt } from './helpers/hostile-prompts.ts';

const IMAGE = '/api/generate/image';
let counter = 0;
const idem = () => ({ 'idempotency-key': `mod-threads-${process.pid}-${++counter}` });
const image = (prompt: string) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });
/** A long refused prompt: 3,000 characters, past the default MODERATION_THREAD_MIN_CHARS (1,000). */
const LONG_REFUSED = 'how to make a pipe bomb for the school. '.repeat(75);

describe('moderation threads', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { MODERATION_BLOCK_THRESHOLD: '1000', MODERATION_THREADS: '1', MODERATION_THREAD_QUEUE: '0' } });
  });
  after(() => s.close());

  it('when more long prompts arrive at once than the moderation threads and their queue take, then the rest answer 503 TEMPORARILY_UNAVAILABLE with Retry-After, and their identities are judged on retry', async () => {
    const u = await s.user({ gems: 1000 });
    const identities = Array.from({ length: 4 }, idem);
    const answers = await Promise.all(identities.map((headers) => s.call('POST', IMAGE, { key: u.secret, body: image(LONG_REFUSED), headers })));
    const busy: Array<Record<string, string>> = [];
    for (const [i, res] of answers.entries()) {
      const retryAfter = res.headers.get('retry-after');
      const e = await errorOf(res);
      assert.deepEqual(e.keys, ['error']);
      if (e.status === 503) {
        assert.equal(e.code, 'TEMPORARILY_UNAVAILABLE');
        assert.ok(Number(retryAfter) > 0, `Retry-After: ${retryAfter}`);
        busy.push(identities[i]!);
      } else {
        assert.equal(e.status, 422, `${e.status} ${e.code}: ${e.message}`);
        assert.match(e.message, /prompt \(violence/);
      }
    }
    // One thread and no queue: the first long prompt takes the thread (it starts with it), the others find it busy.
    assert.ok(busy.length >= 1 && busy.length < answers.length, `${busy.length} of ${answers.length} refused as busy`);
    for (const headers of busy) {
      const retry = await s.call('POST', IMAGE, { key: u.secret, body: image(LONG_REFUSED), headers });
      const e = await errorOf(retry);
      assert.equal(e.code, 'CONTENT_REJECTED', `${e.status}: ${e.message}`);
    }
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.equal(summary.outstandingReservations.count, 0, 'nothing reserved');
    assert.equal(summary.balance, 1000, 'nothing charged');
  });

  it('when a long prompt is allowed or short prompts arrive, then they are decided as in process: 202 for an allowed one, 422 for a short refused one', async () => {
    const u = await s.user({ gems: 1000 });
    const allowed = await s.call('POST', IMAGE, { key: u.secret, body: image(hostilePrompt('prose', 3_000, 3)), headers: idem() });
    assert.equal(allowed.status, 202, await allowed.clone().text());
    const short = await s.call('POST', IMAGE, { key: u.secret, body: image('how to make a pipe bomb'), headers: idem() });
    assert.equal((await errorOf(short)).code, 'CONTENT_REJECTED');
  });
});

describe('moderation threads and SIGTERM', () => {
  const servers = childServers();

  it('when the server gets SIGTERM while a long prompt is judged on a thread, then it answers, stops and exits 0', { timeout: 120_000 }, async () => {
    const u = await seedUserOnDisk(servers.dataDir, 0);
    const child = await servers.start({ SHUTDOWN_GRACE_SECONDS: '30' });
    const post = () =>
      fetch(new URL(IMAGE, child.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${u.secret}`, 'content-type': 'application/json', ...idem() },
        body: JSON.stringify(image(hostilePrompt('unicode', 30_000, 9))),
      });
    const first = await post(); // starts the thread
    assert.ok([402, 422].includes(first.status), `${first.status}: ${await first.clone().text()}`);
    const inFlight = post();
    await new Promise((r) => setTimeout(r, 5)); // the request is on its way (a few ms of its thread's work)
    const exited = child.kill('SIGTERM');
    const answer = await inFlight.catch((error: unknown) => error);
    assert.equal(await exited, 0);
    if (answer instanceof Response) assert.ok([402, 422, 503].includes(answer.status), `${answer.status}`);
    assert.ok(
      child.logs.some((l) => l.msg === 'stopped'),
      'the drain ran to its end',
    );
  });
});
