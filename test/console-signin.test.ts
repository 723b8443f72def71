/**
 * The console's sign-in under attack, against the real server: failures are
 * reserved before a password is checked (concurrent guesses cannot pass the
 * limits together), strangers' failures never lock a holder out of a network
 * they signed in from, IPv6 counts per /64, passwords are hashed off the event
 * loop (and a full hashing queue answers 503 with Retry-After), and an invite
 * works once and ends the login's earlier sessions. The server trusts a
 * loopback proxy, so each test speaks from addresses of its own.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { consoleCall, consoleHolder, PASSWORD, sessionCookieOf, signIn } from './helpers/console.ts';
import * as consoleLogins from '../server/domain/console.ts';
import { systemClock } from '../server/domain/clock.ts';
import { until } from './helpers/poll.ts';

const { ATTEMPT_LIMITS } = consoleLogins;

/** A sign-in attempt from `address`; resolves to the response. */
const attempt = (s: TestServer, email: string, password: string, address: string) => consoleCall(s, 'POST', '/session', { body: { email, password }, address });

/** How many of the responses have each status. */
function statuses(responses: Response[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}

describe('console sign-in hardening', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { TRUST_PROXY: 'loopback' } });
  });
  after(() => s.close());

  it("when 30 wrong passwords for one email arrive at once, then at most the email's limit are checked and the rest get 429", async () => {
    const { email } = await consoleHolder(s);
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => attempt(s, email, `wrong password ${i}`, `198.18.1.${i + 1}`)));
    const counts = statuses(burst);
    assert.equal((counts[401] ?? 0) + (counts[429] ?? 0), 30, JSON.stringify(counts));
    assert.ok((counts[401] ?? 0) <= ATTEMPT_LIMITS.email, `${counts[401]} passwords checked, limit ${ATTEMPT_LIMITS.email}`);
    assert.equal((await errorOf(burst.find((r) => r.status === 429)!)).code, 'TOO_MANY_ATTEMPTS');
  });

  it("when 30 wrong sign-ins from one address arrive at once, then at most the address's limit are checked", async () => {
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => attempt(s, `guess-${i}@example.com`, 'wrong password', '198.18.2.1')));
    const counts = statuses(burst);
    assert.ok((counts[401] ?? 0) <= ATTEMPT_LIMITS.address, `${counts[401]} passwords checked, limit ${ATTEMPT_LIMITS.address}`);
    assert.equal((counts[401] ?? 0) + (counts[429] ?? 0), 30, JSON.stringify(counts));
  });

  it("when a stranger has used up the email's failures, then the holder still signs in from an address they signed in from before, and not from a new one", async () => {
    const { email } = await consoleHolder(s);
    const home = '198.18.3.1';
    await signIn(s, email, PASSWORD, home);
    for (let i = 0; i < ATTEMPT_LIMITS.email * 2; i++) await attempt(s, email, 'wrong password', `198.18.4.${i + 1}`);
    assert.equal((await attempt(s, email, PASSWORD, '198.18.4.200')).status, 429, "a network the holder never used: the email's limit holds");
    assert.equal((await attempt(s, email, PASSWORD, home)).status, 200, "the holder's own network: not locked out");
  });

  it("when others behind the holder's address fail as often as the address allows, then the holder still signs in from it", async () => {
    const { email } = await consoleHolder(s);
    const nat = '198.18.5.1';
    await signIn(s, email, PASSWORD, nat);
    for (let i = 0; i < ATTEMPT_LIMITS.address; i++) assert.equal((await attempt(s, `neighbour-${i}@example.com`, 'wrong password', nat)).status, 401);
    assert.equal((await attempt(s, 'neighbour-x@example.com', 'wrong password', nat)).status, 429, 'the address is limited for strangers');
    assert.equal((await attempt(s, email, PASSWORD, nat)).status, 200);
  });

  it("when wrong passwords for a holder come from the holder's own address, then that pair has a limit of its own", async () => {
    const { email } = await consoleHolder(s);
    const home = '198.18.6.1';
    await signIn(s, email, PASSWORD, home);
    const burst = await Promise.all(Array.from({ length: 12 }, () => attempt(s, email, 'wrong password', home)));
    assert.ok((statuses(burst)[401] ?? 0) <= ATTEMPT_LIMITS.knownAddress, JSON.stringify(statuses(burst)));
    assert.equal((await attempt(s, email, PASSWORD, home)).status, 429);
  });

  it('when sign-ins fail from many addresses of one IPv6 /64, then they count as one address, and another /64 is not limited', async () => {
    for (let i = 0; i < ATTEMPT_LIMITS.address; i++) {
      assert.equal((await attempt(s, `v6-${i}@example.com`, 'wrong password', `2001:db8:7:1::${(i + 1).toString(16)}`)).status, 401);
    }
    assert.equal((await attempt(s, 'v6-x@example.com', 'wrong password', '2001:db8:7:1:ffff:1:2:3')).status, 429);
    assert.equal((await attempt(s, 'v6-y@example.com', 'wrong password', '2001:db8:7:2::1')).status, 401);
  });

  it('when a dozen sign-ins are being checked, then /healthz answers while most of them are still in flight', async () => {
    const addresses = Array.from({ length: 12 }, (_, i) => `198.18.8.${i + 1}`);
    let done = 0;
    const signIns = addresses.map((address, i) => attempt(s, `busy-${i}@example.com`, 'wrong password', address).then((r) => (done++, r)));
    // Every attempt reserves its failure before its password is checked: once all twelve are reserved, all twelve are hashing (or waiting for a thread).
    const reserved = () =>
      s
        .db('console_attempts')
        .whereIn(
          'subject',
          addresses.map((a) => `address:${consoleLogins.networkOf(a)}`),
        )
        .count({ n: '*' })
        .first();
    await until('every attempt reserved', async () => Number((await reserved())?.n) === addresses.length, 30_000, 5);
    const health = await fetch(`${s.url}/healthz`);
    assert.equal(health.status, 200);
    const doneAtHealth = done;
    assert.deepEqual(statuses(await Promise.all(signIns)), { 401: 12 });
    assert.ok(doneAtHealth <= addresses.length / 2, `the health check answered after ${doneAtHealth} of ${addresses.length} sign-ins`);
  });

  it('when a holder sets a new password from an invite, then every earlier session of the login ends', async () => {
    const { accountId, email } = await consoleHolder(s);
    const [a, b] = [await signIn(s, email, PASSWORD, '198.18.9.1'), await signIn(s, email, PASSWORD, '198.18.9.2')];
    const { token } = await consoleLogins.invite(s.db, systemClock, { accountId, email });
    const accepted = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password: 'a fresh password here' }, address: '198.18.9.3' });
    assert.equal(accepted.status, 200);
    for (const old of [a, b]) assert.equal((await errorOf(await consoleCall(s, 'GET', '/account', { session: old }))).code, 'SESSION_EXPIRED');
    const fresh = { cookie: sessionCookieOf(accepted), csrf: (await accepted.json()).csrfToken };
    assert.equal((await consoleCall(s, 'GET', '/account', { session: fresh })).status, 200, "the invite's own session lives");
  });

  it('when one invite is accepted by 12 requests at once, then exactly one signs in and the others get 401 INVITE_INVALID', async () => {
    const accountId = await s.account();
    const email = `concurrent-${process.pid}@example.com`;
    const { token } = await consoleLogins.invite(s.db, systemClock, { accountId, email });
    const accepts = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        consoleCall(s, 'POST', '/invites/accept', { body: { token, password: `password number ${i}` }, address: `198.18.10.${i + 1}` }),
      ),
    );
    assert.deepEqual(statuses(accepts), { 200: 1, 401: 11 });
    for (const refused of accepts.filter((r) => r.status === 401)) assert.equal((await errorOf(refused)).code, 'INVITE_INVALID');
    const winner = accepts.findIndex((r) => r.status === 200);
    assert.equal((await consoleLogins.describeLogins(s.db, systemClock, accountId))[0]!.liveSessions, 1);
    await signIn(s, email, `password number ${winner}`, '198.18.10.100');
  });

  it("when an invite's password is only spaces, then 422 INVALID_REQUEST and the invite still works", async () => {
    const accountId = await s.account();
    const email = `spaces-${process.pid}@example.com`;
    const { token } = await consoleLogins.invite(s.db, systemClock, { accountId, email });
    for (const password of [' '.repeat(12), '\t'.repeat(6) + '\u00a0'.repeat(6), '\u3000'.repeat(12)]) {
      const refused = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password }, address: '198.18.11.1' });
      const error = await errorOf(refused);
      assert.equal(error.status, 422, JSON.stringify(password));
      assert.equal(error.code, 'INVALID_REQUEST');
    }
    const accepted = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password: '  spaces around  ' }, address: '198.18.11.1' });
    assert.equal(accepted.status, 200);
  });
});

describe('console password hashing under load', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { TRUST_PROXY: 'loopback', CONSOLE_HASH_THREADS: '1', CONSOLE_HASH_QUEUE: '0' } });
  });
  after(() => s.close());

  it('when more sign-ins arrive than the hashing threads and queue hold, then the rest get 503 with Retry-After, and they count as no failure', async () => {
    const { email } = await consoleHolder(s);
    const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => attempt(s, `busy-${i}@example.com`, 'wrong password', '198.18.12.1')));
    const busy = burst.filter((r) => r.status === 503);
    assert.ok(busy.length > 0, JSON.stringify(statuses(burst)));
    assert.equal((await errorOf(busy[0]!)).code, 'TEMPORARILY_UNAVAILABLE');
    assert.match(busy[0]!.headers.get('retry-after') ?? '', /^\d+$/);
    // The refused attempts gave their reservations back: the address has its whole allowance but the checked ones.
    const checked = burst.filter((r) => r.status === 401).length;
    for (let i = checked; i < ATTEMPT_LIMITS.address; i++)
      assert.equal((await attempt(s, `later-${i}@example.com`, 'wrong password', '198.18.12.1')).status, 401, `attempt ${i}`);
    assert.equal((await attempt(s, email, PASSWORD, '198.18.12.1')).status, 429);
  });
});
