/**
 * The account console's API against the real server: signing in and
 * out, the cookie's attributes, CSRF, expiry, sign-in limits, keys made and
 * revoked by their holder and used on the generation API, the account's consent.
 * The server trusts a loopback proxy, so each test speaks from addresses of its own.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { OffsetClock } from './helpers/db.ts';
import { consoleCall, consoleHolder, PASSWORD, sessionCookieOf, signIn } from './helpers/console.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import fs from 'node:fs';
import * as media from './helpers/media.ts';
import * as consoleLogins from '../server/domain/console.ts';
import { MAX_ACTIVE_KEYS } from '../server/domain/accounts.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { PROMPT_SHOWN_CHARS } from '../server/domain/task-view.ts';
import * as ledger from '../server/domain/ledger.ts';
import { fill as fillAccountDays } from '../server/storage/migrations/016_account_days.ts';

const IMAGE = { model: 'gemforge-image-1', prompt: 'a fox made in the console', parameters: { resolution: '512' } };

describe('account console API', () => {
  let s: TestServer;
  const clock = new OffsetClock();
  before(async () => {
    s = await startTestServer({ clock, env: { TRUST_PROXY: 'loopback' } });
  });
  after(() => s.close());

  it('when a holder signs in, then the cookie is HttpOnly, SameSite=Strict and under /console, Secure only over TLS, and the account shows its balance', async () => {
    const { accountId, email } = await consoleHolder(s, { gems: 700 });
    const res = await consoleCall(s, 'POST', '/session', { body: { email: email.toUpperCase(), password: PASSWORD } });
    assert.equal(res.status, 200);
    const set = res.headers.getSetCookie().join('\n');
    for (const attribute of [/HttpOnly/, /SameSite=Strict/, /Path=\/console(;|$)/]) assert.match(set, attribute);
    assert.doesNotMatch(set, /Secure/, 'plain http: no Secure attribute');
    const body = await res.json();
    assert.equal(body.accountId, accountId);
    assert.equal(body.email, email);
    const session = { cookie: sessionCookieOf(res), csrf: body.csrfToken };
    const account = await (await consoleCall(s, 'GET', '/account', { session })).json();
    assert.equal(account.balance, 700);
    assert.equal(account.paidConsent, true);
    assert.equal(account.csrfToken, body.csrfToken);

    const tls = await s.call('POST', '/console/api/session', { body: { email, password: PASSWORD }, headers: { 'x-forwarded-proto': 'https' } });
    assert.match(tls.headers.getSetCookie().join('\n'), /Secure/, 'behind a trusted TLS proxy: Secure');
  });

  it('when the password is wrong or the email unknown, then both get the same 401 SIGN_IN_FAILED', async () => {
    const { email } = await consoleHolder(s);
    const wrong = await consoleCall(s, 'POST', '/session', { body: { email, password: 'not the password' }, address: '192.0.2.10' });
    const unknown = await consoleCall(s, 'POST', '/session', { body: { email: 'nobody@example.com', password: 'not the password' }, address: '192.0.2.10' });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get('set-cookie'), null);
    assert.deepEqual(await wrong.json(), await unknown.json());
    assert.equal(unknown.status, 401);
  });

  it('when one email fails too often, then even the right password gets 429 until the window ends, known and unknown emails alike', async () => {
    const { email } = await consoleHolder(s);
    const attempt = (e: string, password: string, i: number) =>
      consoleCall(s, 'POST', '/session', { body: { email: e, password }, address: `198.51.100.${i}` });
    for (let i = 0; i < consoleLogins.ATTEMPT_LIMITS.email; i++) {
      assert.equal((await attempt(email, 'wrong password', i)).status, 401);
      assert.equal((await attempt('ghost@example.com', 'wrong password', i)).status, 401);
    }
    const limited = await attempt(email, PASSWORD, 50);
    assert.equal(limited.status, 429);
    assert.equal((await errorOf(limited)).code, 'TOO_MANY_ATTEMPTS');
    assert.deepEqual(
      await (await attempt('ghost@example.com', PASSWORD, 51)).json(),
      await (await attempt(email, PASSWORD, 52)).json(),
      'a 429 does not tell which emails exist',
    );
    clock.advance(consoleLogins.ATTEMPT_WINDOW_SECONDS * 1000);
    assert.equal((await attempt(email, PASSWORD, 53)).status, 200);
  });

  it("when an email's failures arrive all at once, then every one counts toward the limit", async () => {
    const { email } = await consoleHolder(s);
    const wrong = Array.from({ length: consoleLogins.ATTEMPT_LIMITS.email }, (_, i) =>
      consoleCall(s, 'POST', '/session', { body: { email, password: 'wrong password' }, address: `198.51.100.${100 + i}` }),
    );
    assert.deepEqual(
      (await Promise.all(wrong)).map((r) => r.status),
      wrong.map(() => 401),
    );
    assert.equal((await consoleCall(s, 'POST', '/session', { body: { email, password: PASSWORD }, address: '198.51.100.200' })).status, 429);
  });

  it('when one address fails too often, then it gets 429 for any email while other addresses sign in', async () => {
    const { email } = await consoleHolder(s);
    for (let i = 0; i < consoleLogins.ATTEMPT_LIMITS.address; i++) {
      const res = await consoleCall(s, 'POST', '/session', { body: { email: `guess-${i}@example.com`, password: 'guess' }, address: '203.0.113.7' });
      assert.equal(res.status, 401);
    }
    assert.equal((await consoleCall(s, 'POST', '/session', { body: { email, password: PASSWORD }, address: '203.0.113.7' })).status, 429);
    assert.equal((await consoleCall(s, 'POST', '/session', { body: { email, password: PASSWORD }, address: '203.0.113.8' })).status, 200);
  });

  it("when a state change carries no CSRF token or another session's, then 403 CSRF_TOKEN_INVALID and nothing changes", async () => {
    const { email } = await consoleHolder(s, { paidConsent: true });
    const session = await signIn(s, email);
    const other = await signIn(s, (await consoleHolder(s)).email);
    const missing = await consoleCall(s, 'PATCH', '/account', { session, csrf: false, body: { paidConsent: false } });
    assert.equal(missing.status, 403);
    assert.equal((await errorOf(missing)).code, 'CSRF_TOKEN_INVALID');
    const foreign = await consoleCall(s, 'POST', '/keys', { session: { ...session, csrf: other.csrf }, body: { name: 'x', scopes: ['read'] } });
    assert.equal((await errorOf(foreign)).code, 'CSRF_TOKEN_INVALID');
    assert.equal((await consoleCall(s, 'DELETE', '/session', { session, csrf: false })).status, 403);
    const account = await (await consoleCall(s, 'GET', '/account', { session })).json();
    assert.equal(account.paidConsent, true);
    assert.deepEqual((await (await consoleCall(s, 'GET', '/keys', { session })).json()).keys, []);
  });

  it('when a session is idle too long, or reaches its absolute end however busy, then 401 SESSION_EXPIRED', async () => {
    const { email } = await consoleHolder(s);
    const { idleSeconds, maxSeconds } = s.config.consoleSession;
    const idle = await signIn(s, email);
    clock.advance((idleSeconds + 1) * 1000);
    const expired = await consoleCall(s, 'GET', '/account', { session: idle });
    assert.equal(expired.status, 401);
    assert.equal((await errorOf(expired)).code, 'SESSION_EXPIRED');

    const busy = await signIn(s, email);
    for (let t = 0; t + idleSeconds / 2 < maxSeconds; t += idleSeconds / 2) {
      assert.equal((await consoleCall(s, 'GET', '/keys', { session: busy })).status, 200);
      clock.advance((idleSeconds / 2) * 1000);
    }
    clock.advance((idleSeconds / 2) * 1000);
    assert.equal((await errorOf(await consoleCall(s, 'GET', '/keys', { session: busy }))).code, 'SESSION_EXPIRED');
    assert.equal((await errorOf(await consoleCall(s, 'GET', '/keys'))).code, 'SESSION_EXPIRED', 'no cookie at all: the same answer');
  });

  it('when a holder signs out, or out everywhere, then those cookies stop working', async () => {
    const { email } = await consoleHolder(s);
    const one = await signIn(s, email);
    assert.equal((await consoleCall(s, 'DELETE', '/session', { session: one })).status, 204);
    assert.equal((await consoleCall(s, 'GET', '/account', { session: one })).status, 401);
    const [a, b] = [await signIn(s, email), await signIn(s, email)];
    const everywhere = await consoleCall(s, 'DELETE', '/sessions', { session: a });
    assert.deepEqual(await everywhere.json(), { ended: 2 });
    assert.equal((await consoleCall(s, 'GET', '/account', { session: b })).status, 401);
  });

  it('when only a console session cookie is sent to the generation API, then it answers 401 INVALID_API_KEY', async () => {
    const session = await signIn(s, (await consoleHolder(s)).email);
    const models = await s.call('GET', '/api/generate/models', { headers: { cookie: session.cookie } });
    assert.equal((await errorOf(models)).code, 'INVALID_API_KEY');
    const image = await s.call('POST', '/api/generate/image', {
      body: IMAGE,
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrf, 'idempotency-key': 'cookie-only' },
    });
    assert.equal(image.status, 401);
    assert.equal((await errorOf(image)).code, 'INVALID_API_KEY');
  });

  it('when a holder creates a key, then its secret (shown once) makes an image, its spend and last use are listed, and after revoking it the API answers 401', async () => {
    const session = await signIn(s, (await consoleHolder(s, { gems: 1000 })).email);
    const created = await consoleCall(s, 'POST', '/keys', { session, body: { name: 'laptop', scopes: ['read', 'generate'], monthlyCap: 500 } });
    assert.equal(created.status, 201);
    const { key, secret } = await created.json();
    assert.match(secret, /^gf_[0-9a-f]{64}$/);
    assert.equal(key.hint, `…${secret.slice(-4)}`);
    assert.equal(key.lastUsedAt, null, 'a new key has not been used');

    const submitted = await submit(s, secret, '/api/generate/image', IMAGE);
    assert.equal(submitted.status, 202);
    const task = await waitForTask(s, secret, submitted.body.task.id);
    assert.equal(task.status, 'succeeded');

    const listed = await consoleCall(s, 'GET', '/keys', { session });
    const text = await listed.text();
    assert.ok(!text.includes(secret.slice(3)), 'the secret is never listed');
    const [shown] = JSON.parse(text).keys;
    assert.equal(shown.spendThisMonth, task.chargedGems);
    assert.equal(shown.monthlyCap, 500);
    // Both on the server's clock (which earlier tests of this file moved on).
    assert.ok(typeof shown.lastUsedAt === 'string' && shown.lastUsedAt >= key.createdAt, `last used ${shown.lastUsedAt}, created ${key.createdAt}`);

    const revoked = await consoleCall(s, 'DELETE', `/keys/${key.id}`, { session });
    assert.equal(revoked.status, 200);
    assert.ok((await revoked.json()).revokedAt);
    assert.equal((await errorOf(await s.call('GET', '/api/generate/models', { key: secret }))).code, 'INVALID_API_KEY');
  });

  it('when a key would be the 51st, expire in the past or have a negative cap, then a clear 4xx and nothing is created', async () => {
    const { accountId, email } = await consoleHolder(s);
    const session = await signIn(s, email);
    for (let i = 0; i < MAX_ACTIVE_KEYS; i++) await s.key(accountId, { name: `k${i}` });
    const count = async () => (await (await consoleCall(s, 'GET', '/keys', { session })).json()).keys.length;
    const cases: Array<[unknown, number, string, RegExp]> = [
      [{ name: 'one too many', scopes: ['read'] }, 409, 'KEY_LIMIT_REACHED', /already has 50 keys .*revoke one first/],
      [{ name: 'old', scopes: ['read'], expiresAt: '2001-01-01T00:00:00Z' }, 422, 'INVALID_REQUEST', /expiry must be in the future/],
      [{ name: 'minus', scopes: ['read'], monthlyCap: -1 }, 422, 'INVALID_REQUEST', /monthlyCap must be >= 0/],
      [{ name: 'none', scopes: [] }, 422, 'INVALID_REQUEST', /scopes/],
    ];
    for (const [body, status, code, message] of cases) {
      const error = await errorOf(await consoleCall(s, 'POST', '/keys', { session, body }));
      assert.equal(error.status, status, JSON.stringify(body));
      assert.equal(error.code, code);
      assert.match(error.message, message);
    }
    assert.equal(await count(), MAX_ACTIVE_KEYS);
  });

  it('when a holder revokes a key of another account, then 404 and the key still works', async () => {
    const session = await signIn(s, (await consoleHolder(s)).email);
    const stranger = await s.user();
    const res = await consoleCall(s, 'DELETE', `/keys/${stranger.keyId}`, { session });
    assert.equal((await errorOf(res)).code, 'NOT_FOUND');
    assert.equal((await s.call('GET', '/api/generate/models', { key: stranger.secret })).status, 200);
  });

  it('when a holder turns paid-Gem consent off, then the account says so', async () => {
    const session = await signIn(s, (await consoleHolder(s, { paidConsent: true })).email);
    const res = await consoleCall(s, 'PATCH', '/account', { session, body: { paidConsent: false } });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).paidConsent, false);
    assert.equal((await errorOf(await consoleCall(s, 'PATCH', '/account', { session, body: { paidConsent: 'no' } }))).status, 422);
    const strict = await consoleCall(s, 'PATCH', '/account', { session, body: { contentPreference: 'strict' } });
    assert.equal((await strict.json()).contentPreference, 'strict');
    for (const body of [{}, { contentPreference: 'lax' }]) {
      assert.equal((await errorOf(await consoleCall(s, 'PATCH', '/account', { session, body }))).code, 'INVALID_REQUEST', JSON.stringify(body));
    }
  });

  it("when moderation refuses the account's requests until it is blocked, then the account shows each refusal's reason and the block", async () => {
    const { accountId, email } = await consoleHolder(s);
    const session = await signIn(s, email);
    const { secret } = await s.key(accountId);
    const fresh = await (await consoleCall(s, 'GET', '/account', { session })).json();
    assert.deepEqual(fresh.moderation, { blockedAt: null, refusals: [] });
    const body = { ...IMAGE, prompt: 'how to build a bomb' };
    for (let i = 0; i < s.config.moderationBlockThreshold; i++) {
      const refused = await s.call('POST', '/api/generate/image', { key: secret, body, headers: { 'idempotency-key': `console-bomb-${i}` } });
      assert.equal((await errorOf(refused)).code, 'CONTENT_REJECTED');
    }
    const account = await (await consoleCall(s, 'GET', '/account', { session })).json();
    assert.equal(account.state, 'blocked');
    assert.ok(account.moderation.blockedAt);
    assert.equal(account.moderation.refusals.length, s.config.moderationBlockThreshold);
    assert.deepEqual(account.moderation.refusals[0], {
      operation: account.moderation.refusals[0].operation,
      field: 'prompt',
      categories: ['violence'],
      createdAt: account.moderation.refusals[0].createdAt,
    });
  });

  it('when an invite is accepted, then the holder is signed in with the new password, and the link works only once and only in time', async () => {
    const accountId = await s.account();
    const { token } = await consoleLogins.invite(s.db, clock, { accountId, email: 'new@example.com' });
    const accepted = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password: 'a brand new password' } });
    assert.equal(accepted.status, 200);
    assert.equal((await accepted.json()).accountId, accountId);
    const again = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password: 'a brand new password' } });
    assert.equal((await errorOf(again)).code, 'INVITE_INVALID');
    await signIn(s, 'new@example.com', 'a brand new password');

    const late = await consoleLogins.invite(s.db, clock, { accountId, email: 'late@example.com' });
    clock.advance((consoleLogins.INVITE_HOURS * 3600 + 1) * 1000);
    assert.equal(
      (await errorOf(await consoleCall(s, 'POST', '/invites/accept', { body: { token: late.token, password: 'a brand new password' } }))).code,
      'INVITE_INVALID',
    );
    const short = await consoleCall(s, 'POST', '/invites/accept', { body: { token: 'x', password: 'short' } });
    assert.equal((await errorOf(short)).status, 422);
  });

  it("when the account's keys made tasks, then the activity pages them newest first with their Gems and signed outputs, and shows no other account's", async () => {
    const { accountId, email } = await consoleHolder(s);
    const session = await signIn(s, email);
    const { secret } = await s.key(accountId);
    const ids: string[] = [];
    for (const prompt of ['first fox', 'second fox', 'third fox'])
      ids.push((await submit(s, secret, '/api/generate/image', { ...IMAGE, prompt })).body.task.id);
    const done = await waitForTask(s, secret, ids[2]!);
    await submit(s, (await s.user()).secret, '/api/generate/image', IMAGE); // another account's

    const first = await (await consoleCall(s, 'GET', '/tasks?limit=2', { session })).json();
    assert.deepEqual(
      first.tasks.map((t: { id: string }) => t.id),
      [ids[2], ids[1]],
    );
    const newest = first.tasks[0];
    assert.equal(newest.status, 'succeeded');
    assert.equal(newest.chargedGems, done.chargedGems);
    const download = await fetch(newest.outputs[0].asset.url);
    assert.equal(download.status, 200, 'the output URL is signed');
    assert.ok(first.next);
    const second = await (await consoleCall(s, 'GET', `/tasks?limit=2&cursor=${first.next}`, { session })).json();
    assert.deepEqual(
      second.tasks.map((t: { id: string }) => t.id),
      [ids[0]],
    );
    assert.equal(second.next, null);

    for (const query of ['?limit=0', '?limit=51', '?cursor=bm90LWEtY3Vyc29y', '?page=2']) {
      assert.equal((await errorOf(await consoleCall(s, 'GET', `/tasks${query}`, { session }))).code, 'INVALID_REQUEST', query);
    }
  });

  it("when the account's keys made text requests, then the charges page them newest first with what was held, charged and released", async () => {
    const { accountId, email } = await consoleHolder(s, { gems: 1000 });
    const session = await signIn(s, email);
    const { secret } = await s.key(accountId);
    const ids: string[] = [];
    for (const content of ['hello', 'hello again']) {
      const res = await s.call('POST', '/api/generate/text/v1/chat/completions', {
        key: secret,
        body: { model: 'gemforge-text-1', messages: [{ role: 'user', content }] },
        headers: { 'idempotency-key': `console-text-${content.length}` },
      });
      assert.equal(res.status, 200, await res.clone().text());
      ids.push((await res.json()).id);
    }
    const first = await (await consoleCall(s, 'GET', '/charges?limit=1', { session })).json();
    assert.equal(first.charges.length, 1);
    const [newest] = first.charges;
    assert.equal(newest.ref, ids[1]);
    assert.equal(newest.state, 'settled');
    assert.ok(newest.chargedGems > 0);
    assert.equal(newest.chargedGems + newest.releasedGems, newest.heldGems);
    const second = await (await consoleCall(s, 'GET', `/charges?limit=1&cursor=${first.next}`, { session })).json();
    assert.deepEqual(
      second.charges.map((c: { ref: string }) => c.ref),
      [ids[0]],
    );
    assert.equal(second.next, null);
  });

  it("when the account uploaded assets and cloned a voice, then the console pages its uploads newest first and lists its own voices, and no other account's", async () => {
    const { accountId, email } = await consoleHolder(s, { gems: 1000 });
    const session = await signIn(s, email);
    const { secret } = await s.key(accountId);
    const uploadAs = async (key: string) => {
      const res = await fetch(new URL('/api/generate/assets', s.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'image/png' },
        body: fs.readFileSync(await media.image('png')),
      });
      assert.equal(res.status, 201, await res.clone().text());
      return ((await res.json()) as { asset: { id: string } }).asset.id;
    };
    const uploaded = [await uploadAs(secret), await uploadAs(secret)];
    await uploadAs((await s.user()).secret); // another account's
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(await media.speech(20))], { type: 'audio/wav' }), 'narration.wav');
    form.append('duration', '20');
    form.append('rightsConfirmed', 'true');
    const cloned = await fetch(new URL('/api/generate/voices', s.url), { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: form });
    assert.equal(cloned.status, 201, await cloned.clone().text());
    const voiceId = ((await cloned.json()) as { voice: { id: string } }).voice.id;

    const first = await (await consoleCall(s, 'GET', '/uploads?limit=1', { session })).json();
    assert.equal(first.uploads.length, 1);
    assert.equal(first.uploads[0].kind, 'image');
    assert.equal(first.uploads[0].mimeType, 'image/png');
    assert.ok(first.uploads[0].sizeBytes > 0);
    const second = await (await consoleCall(s, 'GET', `/uploads?cursor=${first.next}`, { session })).json();
    const listed = [...first.uploads, ...second.uploads].map((u: { id: string }) => u.id);
    // The voice's sample is an upload of the account too; the other account's image is not listed.
    assert.deepEqual(
      listed.filter((id: string) => uploaded.includes(id)),
      [uploaded[1], uploaded[0]],
      'newest first',
    );
    assert.equal(new Set(listed).size, listed.length, 'no page repeats a row');
    const own = (await s.db('assets').where({ account_id: accountId, origin: 'upload' }).select('id')).map((r: { id: string }) => r.id);
    assert.deepEqual([...listed].sort(), [...own].sort(), "every upload of the account's, and only those");
    assert.equal(second.next, null);
    const voices = await (await consoleCall(s, 'GET', '/voices', { session })).json();
    assert.deepEqual(
      voices.voices.map((v: { id: string }) => v.id),
      [voiceId],
    );
    assert.equal(voices.voices[0].state, 'ready');
    assert.ok(voices.voices[0].durationSeconds > 19);
    assert.equal((await consoleCall(s, 'GET', '/uploads?cursor=not-a-cursor', { session })).status, 422);
  });

  it('when /console is opened, then the page and its bundled script come from this server under a strict Content-Security-Policy', async () => {
    const page = await fetch(`${s.url}/console`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'; script-src 'self'/);
    const html = await page.text();
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from elsewhere');
    const script = await fetch(`${s.url}/console/assets/console.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /javascript/);
    assert.equal((await fetch(`${s.url}/console/nothing-here`)).status, 404);
  });

  it('when PUBLIC_BASE_URL names another origin, then the page may show output previews from it and from nowhere else', async () => {
    const other = await startTestServer({ env: { PUBLIC_BASE_URL: 'https://media.example.com/base' } });
    try {
      const csp = (await fetch(`${other.url}/console`)).headers.get('content-security-policy') ?? '';
      assert.match(csp, /img-src 'self' https:\/\/media\.example\.com;/);
      assert.match(csp, /connect-src 'self';/);
    } finally {
      await other.close();
    }
  });

  it("when a holder changes a key's name, expiry and cap, then the key shows them, the cap binds the next request, null clears them, and bad changes are refused", async () => {
    const { email } = await consoleHolder(s, { gems: 1000 });
    const session = await signIn(s, email);
    const created = await (await consoleCall(s, 'POST', '/keys', { session, body: { name: 'laptop', scopes: ['read', 'generate'] } })).json();
    const keyId = created.key.id as string;
    const expiresAt = new Date(clock.now().getTime() + 7 * 86_400_000).toISOString();
    const patched = await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body: { name: 'desk', expiresAt, monthlyCap: 0 } });
    assert.equal(patched.status, 200, await patched.clone().text());
    const key = await patched.json();
    assert.deepEqual([key.name, key.expiresAt, key.monthlyCap], ['desk', expiresAt, 0]);
    const listed = (await (await consoleCall(s, 'GET', '/keys', { session })).json()).keys.find((k: { id: string }) => k.id === keyId);
    assert.deepEqual([listed.name, listed.monthlyCap], ['desk', 0]);
    assert.equal((await submit(s, created.secret, '/api/generate/image', IMAGE)).body.error?.code, 'API_KEY_LIMIT', 'the cap of 0 binds at once');

    const cleared = await (await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body: { expiresAt: null, monthlyCap: null } })).json();
    assert.deepEqual([cleared.name, cleared.expiresAt, cleared.monthlyCap], ['desk', null, null], 'what the body leaves out stays');
    const made = await submit(s, created.secret, '/api/generate/image', IMAGE);
    assert.ok(made.body.task, `no cap: the key spends again (${JSON.stringify(made.body)})`);

    for (const [body, status] of [
      [{ monthlyCap: -1 }, 422],
      [{ monthlyCap: 1.5 }, 422],
      [{ expiresAt: new Date(clock.now().getTime() - 1000).toISOString() }, 422],
      [{ name: '' }, 422],
      [{}, 422],
      [{ secret: 'x' }, 422],
    ] as const) {
      assert.equal((await errorOf(await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body }))).status, status, JSON.stringify(body));
    }
    assert.match(
      (await errorOf(await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body: { expiresAt: new Date(clock.now().getTime() - 1000).toISOString() } })))
        .message,
      /future/,
    );
    assert.equal((await errorOf(await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, csrf: false, body: { name: 'x' } }))).code, 'CSRF_TOKEN_INVALID');
    const other = await s.user();
    assert.equal(
      (await errorOf(await consoleCall(s, 'PATCH', `/keys/${other.keyId}`, { session, body: { name: 'mine now' } }))).code,
      'NOT_FOUND',
      "another account's key",
    );
    assert.equal((await consoleCall(s, 'DELETE', `/keys/${keyId}`, { session })).status, 200);
    const revoked = await errorOf(await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body: { name: 'back' } }));
    assert.deepEqual([revoked.status, revoked.code], [422, 'INVALID_REQUEST']);
    assert.match(revoked.message, /revoked/);
  });

  it('when tasks list, then each carries the key that made it (by its name now) and the start of its prompt', async () => {
    const { accountId, email } = await consoleHolder(s);
    const session = await signIn(s, email);
    const { id: keyId, secret } = await s.key(accountId, { name: 'studio' });
    const long = `a fox ${'very '.repeat(100)}long prompt`;
    const task = (await submit(s, secret, '/api/generate/image', { ...IMAGE, prompt: long })).body.task;
    await consoleCall(s, 'PATCH', `/keys/${keyId}`, { session, body: { name: 'studio renamed' } });
    const [shown] = (await (await consoleCall(s, 'GET', '/tasks?limit=1', { session })).json()).tasks;
    assert.deepEqual([shown.id, shown.keyId, shown.keyName], [task.id, keyId, 'studio renamed']);
    assert.equal(Array.from(shown.prompt as string).length, PROMPT_SHOWN_CHARS);
    assert.ok(shown.prompt.startsWith('a fox very') && shown.prompt.endsWith('…'));
  });

  it('when the account spends on images, text and extraction over days, then usage shows 30 UTC days by kind from running figures, each key against its cap, and the ledger verifies', async () => {
    const { accountId, email } = await consoleHolder(s, { gems: 5000 });
    const capped = await s.key(accountId, { name: 'capped', cap: 400 });
    const open = await s.key(accountId, { name: 'open' });
    const yesterday = await waitForTask(s, capped.secret, (await submit(s, capped.secret, '/api/generate/image', IMAGE)).body.task.id);
    clock.advance(86_400_000);
    const session = await signIn(s, email); // a day later: a session of today's
    const today = await Promise.all(
      [capped, open, open].map(async (k) => waitForTask(s, k.secret, (await submit(s, k.secret, '/api/generate/image', IMAGE)).body.task.id)),
    );
    const text = await s.call('POST', '/api/generate/text/v1/chat/completions', {
      key: open.secret,
      body: { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hello usage' }] },
      headers: { 'idempotency-key': `usage-text-${process.pid}` },
    });
    assert.equal(text.status, 200, await text.clone().text());
    const charges = (await (await consoleCall(s, 'GET', '/charges', { session })).json()).charges as Array<{ chargedGems: number }>;
    const textGems = charges.reduce((sum, c) => sum + c.chargedGems, 0);

    const res = await consoleCall(s, 'GET', '/usage', { session });
    assert.equal(res.status, 200, await res.clone().text());
    const usage = await res.json();
    assert.equal(usage.days.length, 30);
    const day = (offset: number) => new Date(clock.now().getTime() - offset * 86_400_000).toISOString().slice(0, 10);
    assert.equal(usage.days.at(-1).day, day(0), 'today (UTC) last');
    assert.equal(usage.days[0].day, day(29));
    assert.deepEqual(usage.days.at(-1).gems, { image: today.reduce((sum, t) => sum + t.chargedGems, 0), video: 0, audio: 0, text: textGems, extraction: 0 });
    assert.deepEqual(usage.days.at(-2).gems, { image: yesterday.chargedGems, video: 0, audio: 0, text: 0, extraction: 0 });
    const spend = Object.fromEntries(
      usage.keys.map((k: { name: string; spendThisMonth: number; monthlyCap: number | null }) => [k.name, [k.spendThisMonth, k.monthlyCap]]),
    );
    // Both days may fall in two UTC months: the keys' spend is this month's, as the cap counts it.
    const sameMonth = day(0).slice(0, 7) === day(1).slice(0, 7);
    assert.deepEqual(spend.capped, [today[0]!.chargedGems + (sameMonth ? yesterday.chargedGems : 0), 400]);
    assert.deepEqual(spend.open, [today[1]!.chargedGems + today[2]!.chargedGems + textGems, null]);
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
  });

  it("when many tasks of one account settle at once, then the day's figure is their exact sum and the ledger verifies", async () => {
    const { accountId, email } = await consoleHolder(s, { gems: 20_000 });
    const session = await signIn(s, email);
    const keys = await Promise.all([0, 1, 2].map((i) => s.key(accountId, { name: `k${i}` })));
    const tasks = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const k = keys[i % keys.length]!;
        return waitForTask(s, k.secret, (await submit(s, k.secret, '/api/generate/image', { ...IMAGE, prompt: `fox ${i}` })).body.task.id);
      }),
    );
    const usage = await (await consoleCall(s, 'GET', '/usage', { session })).json();
    assert.equal(
      usage.days.at(-1).gems.image,
      tasks.reduce((sum, t) => sum + t.chargedGems, 0),
    );
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, []);
  });

  it('when migration 016 fills from rows already there, then each reservation gets its kind and each day the figure its settlements wrote', async () => {
    const fresh = await startTestServer(); // its own database: the fill reads and writes every account's rows
    try {
      const { accountId, secret } = await fresh.user({ gems: 5000, paidConsent: true });
      await waitForTask(fresh, secret, (await submit(fresh, secret, '/api/generate/image', IMAGE)).body.task.id);
      const text = await fresh.call('POST', '/api/generate/text/v1/chat/completions', {
        key: secret,
        body: { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'hello fill' }] },
        headers: { 'idempotency-key': `fill-text-${process.pid}` },
      });
      assert.equal(text.status, 200);
      const extraction = await ledger.reserve(fresh.db, clock, {
        accountId,
        keyId: null,
        purpose: 'llm',
        kind: 'extraction',
        amount: 3,
        ref: 'ext_000000000001',
      });
      await ledger.settle(fresh.db, clock, extraction.id, 2);
      const read = async () => ({
        kinds: await fresh.db('reservations').select('id', 'kind').orderBy('id'),
        days: (await fresh.db('account_days').select('*').orderBy(['account_id', 'day', 'kind'])).map((r) => ({ ...r, posted: Number(r.posted) })),
      });
      const written = await read();
      assert.deepEqual(new Set(written.days.map((d) => d.kind)), new Set(['image', 'text', 'extraction']));

      await fresh.db('reservations').update({ kind: null });
      await fresh.db('account_days').delete();
      await fillAccountDays(fresh.db);
      assert.deepEqual(await read(), written);
      assert.deepEqual((await verifyLedger(fresh.db, [verifyTasks])).problems, []);
    } finally {
      await fresh.close();
    }
  });
});
