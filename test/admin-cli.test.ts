/**
 * The admin CLI as a newcomer uses it: a subprocess on the same DATA_DIR as a
 * running server, printing JSON, failing clearly on bad arguments.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { admin, adminText, adminWithInput } from './helpers/admin.ts';
import { consoleCall, signIn } from './helpers/console.ts';
import { statusWithin } from './helpers/auth.ts';
import { childServers, seedUserOnDisk } from './helpers/child.ts';

describe('admin CLI', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('when a newcomer makes an account and a read key with the CLI, then the key lists models and revoking it stops access', async () => {
    const acct = await admin(s.dataDir, 'account', 'create', '--name', 'Ada', '--gems', '500', '--llm-allowance', '100', '--paid-consent');
    assert.equal(acct.code, 0, acct.stderr);
    assert.match(acct.json.id, /^acct_/);
    assert.equal(acct.json.balance, 500);
    assert.equal(acct.json.llmAllowance, 100);
    assert.equal(acct.json.paidConsent, true);

    const key = await admin(s.dataDir, 'key', 'create', '--account', acct.json.id, '--name', 'laptop', '--scopes', 'read', '--cap', '0');
    assert.equal(key.code, 0, key.stderr);
    assert.match(key.json.secret, /^gf_[0-9a-f]{64}$/);
    assert.deepEqual(key.json.scopes, ['read']);
    assert.equal(key.json.monthlyCap, 0);

    assert.equal((await s.call('GET', '/api/generate/models', { key: key.json.secret })).status, 200);

    const list = await admin(s.dataDir, 'key', 'list', '--account', acct.json.id);
    assert.equal(list.code, 0);
    assert.equal(list.json.keys.length, 1);
    assert.ok(!JSON.stringify(list.json).includes(key.json.secret.slice(3)), 'a list never shows a secret');

    const revoked = await admin(s.dataDir, 'key', 'revoke', key.json.id);
    assert.equal(revoked.code, 0);
    assert.ok(revoked.json.revokedAt);
    // Another process revoked it: the server's key cache lets it through for at most one second.
    assert.equal(await statusWithin(() => s.call('GET', '/api/generate/models', { key: key.json.secret }), 401, 1000), 401);

    const blocked = await admin(s.dataDir, 'account', 'update', acct.json.id, '--state', 'blocked', '--gems', '20', '--no-paid-consent');
    assert.equal(blocked.code, 0, blocked.stderr);
    assert.equal(blocked.json.state, 'blocked');
    assert.equal(blocked.json.balance, 20);
    assert.equal(blocked.json.paidConsent, false);

    const show = await admin(s.dataDir, 'account', 'show', acct.json.id);
    assert.equal(show.code, 0);
    for (const field of ['balance', 'llmAllowanceUsed', 'outstandingReservations', 'keys']) assert.ok(field in show.json, field);

    const verify = await admin(s.dataDir, 'ledger', 'verify');
    assert.equal(verify.code, 0);
    assert.equal(verify.json.ok, true);
  });

  it('when the arguments are bad, then a clear message goes to stderr and the exit is non-zero', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['account', 'create'], /--name is required/],
      [['account', 'create', '--name', 'x', '--gems', '-5'], /--gems|argument/],
      [['account', 'create', '--name', 'é'.repeat(201)], /name must be at most 200 characters/],
      [['account', 'create', '--name', 'x', '--gems', 'lots'], /--gems must be a whole number/],
      [['account', 'update', 'acct_missing', '--state', 'active'], /no account with id acct_missing/],
      [['account', 'update', 'acct_x', '--state', 'sleepy'], /--state must be one of/],
      [['key', 'create', '--account', 'acct_missing', '--name', 'n', '--scopes', 'read'], /no account/],
      [['key', 'create', '--account', 'a', '--name', 'n', '--scopes', 'admin'], /unknown scope "admin"/],
      [['key', 'create', '--account', 'a', '--name', 'n', '--scopes', 'read', '--expires', 'tomorrow'], /--expires must be an ISO-8601/],
      [['key', 'revoke'], /exactly one key ID/],
      [['frobnicate'], /unknown command/],
    ];
    for (const [args, message] of cases) {
      const r = await admin(s.dataDir, ...args);
      assert.notEqual(r.code, 0, `${args.join(' ')} should fail`);
      assert.match(r.stderr, message, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.json, undefined, 'nothing on stdout');
    }
  });

  it('when help is asked for, then the whole usage, a group or one command is printed on stdout with exit 0', async () => {
    const text = async (...args: string[]) => {
      const r = await adminText(s.dataDir, ...args);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '');
      return r.stdout;
    };
    assert.match(await text('--help'), /account create --name N[\s\S]*moderation clear[\s\S]*DATA_DIR/);
    const keys = await text('key', '--help');
    assert.match(keys, /key create[\s\S]*key revoke[\s\S]*key list/);
    assert.doesNotMatch(keys, /account create/);
    assert.equal(
      (await text('account', 'create', '--help')).trim(),
      'usage: gemforge admin <command>\n  account create --name N [--gems G] [--llm-allowance A] [--paid-consent]',
    );
  });

  it('when a command or a flag is mistyped, then the message says what is close and what the command takes', async () => {
    const command = await admin(s.dataDir, 'acount', 'create', '--name', 'x');
    assert.equal(command.code, 2);
    assert.match(command.stderr, /unknown command "gemforge admin acount create --name x" \(did you mean "gemforge admin account create"\?\)/);
    const flag = await admin(s.dataDir, 'account', 'create', '--nme', 'x');
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /unknown option --nme \(did you mean --name\?\); this command takes --name, --gems, --llm-allowance, --paid-consent/);
    assert.doesNotMatch(flag.stderr, /positional argument/, "not Node's parser message");
    const value = await admin(s.dataDir, 'key', 'list', '--account');
    assert.equal(value.code, 2);
    assert.match(value.stderr, /--account needs a value/);
  });

  it('when run where no server data is, then it says so and creates nothing', async () => {
    if (process.env.TEST_DATABASE_URL) return; // Postgres: the data is the database's, wherever this runs
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-nodata-'));
    try {
      const r = await adminText(path.join(empty, 'data'), 'ledger', 'verify');
      assert.equal(r.code, 2);
      assert.match(r.stderr, /no gemforge data here: .*gemforge\.sqlite does not exist\. Start the server once \(npm start\)/);
      assert.equal(r.stdout, '');
      assert.deepEqual(fs.readdirSync(empty), [], 'no data directory was created');
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  it('when a key would be the 51st non-revoked key of an account, then it is refused', async () => {
    const accountId = await s.account();
    for (let i = 0; i < 50; i++) await s.key(accountId);
    const r = await admin(s.dataDir, 'key', 'create', '--account', accountId, '--name', 'one-too-many', '--scopes', 'read');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /50 non-revoked keys/);
  });

  it('when 60 keys are created for one account at once, then exactly 50 are made and the rest refused', async () => {
    const accountId = await s.account();
    const made = await Promise.all(
      Array.from({ length: 60 }, () =>
        s.key(accountId).then(
          () => 1,
          (e: Error) => (/50 non-revoked keys/.test(e.message) ? 0 : Promise.reject(e)),
        ),
      ),
    );
    assert.equal(
      made.reduce((a: number, b) => a + b, 0),
      50,
    );
    const list = await admin(s.dataDir, 'key', 'list', '--account', accountId);
    assert.equal(list.json.keys.length, 50);
  });

  it('when an expiry in the past is given, then the key is refused', async () => {
    const accountId = await s.account();
    const r = await admin(s.dataDir, 'key', 'create', '--account', accountId, '--name', 'old', '--scopes', 'read', '--expires', '2001-01-01T00:00:00Z');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /future/);
  });

  it('when an operator releases an uncertain identity, then its reservation is freed, replays answer REQUEST_FAILED and the ledger verifies', async () => {
    const user = await s.user({ gems: 100, cap: 10 });
    const body = { model: 'gemforge-image-1', prompt: 'lost [[scenario:uncertain]]', parameters: { resolution: '512' } };
    const headers = { 'idempotency-key': 'lost-1' };
    const first = await s.call('POST', '/api/generate/image', { key: user.secret, body, headers });
    assert.equal((await errorOf(first)).code, 'REQUEST_UNCERTAIN');

    const held = await admin(s.dataDir, 'account', 'show', user.accountId);
    assert.equal(held.json.outstandingReservations.count, 1);
    const quoted = held.json.outstandingReservations.gems;
    assert.ok(quoted > 0);

    const list = await admin(s.dataDir, 'identity', 'list', '--account', user.accountId);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      list.json.identities.map((i: { keyId: string; idempotencyKey: string; state: string }) => [i.keyId, i.idempotencyKey, i.state]),
      [[user.keyId, 'lost-1', 'uncertain']],
    );

    const released = await admin(s.dataDir, 'identity', 'release', user.keyId, 'lost-1');
    assert.equal(released.code, 0, released.stderr);
    assert.equal(released.json.state, 'released');
    assert.equal(released.json.releasedGems, quoted);

    const replay = await s.call('POST', '/api/generate/image', { key: user.secret, body, headers });
    assert.equal((await errorOf(replay)).code, 'REQUEST_FAILED');
    const after = await admin(s.dataDir, 'account', 'show', user.accountId);
    assert.equal(after.json.outstandingReservations.count, 0);
    assert.equal(after.json.balance, 100, 'nothing was charged');
    assert.equal((await admin(s.dataDir, 'ledger', 'verify')).code, 0);

    const again = await admin(s.dataDir, 'identity', 'release', user.keyId, 'lost-1');
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already released/);
    assert.equal((await admin(s.dataDir, 'identity', 'list', '--account', user.accountId)).json.identities.length, 0);
  });

  it('when an operator sets content preference, networks and regions, then account show lists them and the server applies them', async () => {
    const user = await s.user();
    const updated = await admin(
      s.dataDir,
      'account',
      'update',
      user.accountId,
      '--content-preference',
      'strict',
      '--network-deny',
      '127.0.0.0/8, 2001:DB8::/32',
      '--network-allow',
      '::ffff:127.0.0.1/128',
      '--blocked-regions',
      'fr,de-by',
      '--unknown-region',
      'allow',
    );
    assert.equal(updated.code, 0, updated.stderr);
    const show = await admin(s.dataDir, 'account', 'show', user.accountId);
    assert.equal(show.json.contentPreference, 'strict');
    assert.deepEqual(show.json.network, { allow: ['127.0.0.1/32'], deny: ['127.0.0.0/8', '2001:db8::/32'] });
    assert.deepEqual(show.json.regions, { blocked: ['FR', 'DE-BY'], unknown: 'allow' });
    assert.equal(show.json.moderationBlockedAt, null);
    // Another process changed the account: the server applies it within one second (its key cache's rule).
    const models = () => s.call('GET', '/api/generate/models', { key: user.secret });
    assert.equal(await statusWithin(models, 403, 1000), 403);
    const blocked = await errorOf(await models());
    assert.deepEqual([blocked.status, blocked.code], [403, 'NETWORK_BLOCKED']);

    const cleared = await admin(
      s.dataDir,
      'account',
      'update',
      user.accountId,
      '--network-deny',
      '',
      '--blocked-regions',
      '',
      '--content-preference',
      'standard',
    );
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.deepEqual([cleared.json.network.deny, cleared.json.regions.blocked, cleared.json.contentPreference], [[], [], 'standard']);
    assert.equal(await statusWithin(models, 200, 1000), 200);

    const bad: Array<[string[], RegExp]> = [
      [['--content-preference', 'lenient'], /--content-preference must be one of standard, strict/],
      [['--network-deny', '10.0.0.0/33'], /--network-deny: "10.0.0.0\/33" is not an IPv4 or IPv6 address or CIDR range/],
      [['--network-allow', 'example.com'], /--network-allow: "example.com"/],
      [['--blocked-regions', 'F R'], /--blocked-regions: "F R" is not a region code/],
      [['--unknown-region', 'maybe'], /--unknown-region must be one of allow, block/],
    ];
    for (const [args, message] of bad) {
      const r = await admin(s.dataDir, 'account', 'update', user.accountId, ...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message);
    }
  });

  it("when an operator sets an account's fair-share caps, then account show lists them as its own, with the server's rates and the account's queue, and default restores the server's", async () => {
    const user = await s.user();
    const before = await admin(s.dataDir, 'account', 'show', user.accountId);
    assert.equal(before.code, 0, before.stderr);
    assert.deepEqual(before.json.limits.localConcurrency, { value: s.config.accountLocalConcurrency, own: false });
    assert.deepEqual(before.json.limits.now, { queued: 0, running: { local: 0, remote: 0 } });
    assert.equal(before.json.limits.ratesPerSecond.keyMedia, s.config.rates.keyMedia);
    const set = await admin(s.dataDir, 'account', 'update', user.accountId, '--local-concurrency', '1', '--remote-concurrency', '0', '--queued-tasks', '10');
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(
      [set.json.limits.localConcurrency, set.json.limits.remoteConcurrency, set.json.limits.queuedTasks],
      [
        { value: 1, own: true },
        { value: 0, own: true },
        { value: 10, own: true },
      ],
    );
    const reset = await admin(s.dataDir, 'account', 'update', user.accountId, '--local-concurrency', 'default');
    assert.deepEqual(reset.json.limits.localConcurrency, { value: s.config.accountLocalConcurrency, own: false });
    assert.deepEqual(reset.json.limits.queuedTasks, { value: 10, own: true });
    const bad = await admin(s.dataDir, 'account', 'update', user.accountId, '--queued-tasks', 'many');
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--queued-tasks must be a whole number/);
  });

  it('when an account is blocked by repeated moderation refusals, then moderation list shows the records and moderation clear lifts the block', async () => {
    const user = await s.user({ gems: 100 });
    const body = { model: 'gemforge-image-1', prompt: 'how to build a bomb', parameters: { resolution: '512' } };
    for (let i = 0; i < s.config.moderationBlockThreshold; i++) {
      const r = await s.call('POST', '/api/generate/image', { key: user.secret, body, headers: { 'idempotency-key': `bomb-${i}` } });
      assert.equal((await errorOf(r)).code, 'CONTENT_REJECTED');
    }
    assert.equal((await errorOf(await s.call('GET', '/api/generate/models', { key: user.secret }))).code, 'ACCOUNT_BLOCKED');
    const show = await admin(s.dataDir, 'account', 'show', user.accountId);
    assert.equal(show.json.state, 'blocked');
    assert.ok(show.json.moderationBlockedAt);

    const list = await admin(s.dataDir, 'moderation', 'list', '--account', user.accountId);
    assert.equal(list.code, 0, list.stderr);
    assert.equal(list.json.records.length, s.config.moderationBlockThreshold);
    assert.deepEqual(Object.keys(list.json.records[0]).sort(), [
      'accountId',
      'categories',
      'clearedAt',
      'createdAt',
      'field',
      'id',
      'keyId',
      'operation',
      'provider',
    ]);
    assert.deepEqual(list.json.records[0].categories, ['violence']);

    const clear = await admin(s.dataDir, 'moderation', 'clear', '--account', user.accountId);
    assert.equal(clear.code, 0, clear.stderr);
    assert.deepEqual(clear.json, { accountId: user.accountId, cleared: s.config.moderationBlockThreshold, unblocked: true, state: 'active' });
    // The server sees the operator's change within one second (its key cache's rule).
    assert.equal(await statusWithin(() => s.call('GET', '/api/generate/models', { key: user.secret }), 200, 1000), 200);
    assert.equal((await admin(s.dataDir, 'moderation', 'list', '--account', user.accountId)).json.records.length, 0);
    assert.equal((await admin(s.dataDir, 'moderation', 'list', '--account', user.accountId, '--all')).json.records.length, s.config.moderationBlockThreshold);

    const missing = await admin(s.dataDir, 'moderation', 'clear');
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--account is required/);
    assert.match((await admin(s.dataDir, 'moderation', 'clear', '--account', 'acct_nope')).stderr, /no account with id acct_nope/);
  });

  it('when an operator names an unknown identity or leaves out an argument, then the release is refused with a message', async () => {
    const unknown = await admin(s.dataDir, 'identity', 'release', 'key_nope', 'nope');
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no identity nope for key key_nope/);
    const missing = await admin(s.dataDir, 'identity', 'release', 'key_nope');
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /KEY_ID and IDEMPOTENCY_KEY/);
  });
  it('when an operator invites a holder and makes a login with a password, then the link and the password sign in, list shows them and signout ends their sessions', async () => {
    const accountId = await s.account();
    const invited = await admin(
      s.dataDir,
      'console',
      'invite',
      '--account',
      accountId,
      '--email',
      'Grace@Example.com',
      '--base-url',
      'https://console.example.com/',
    );
    assert.equal(invited.code, 0, invited.stderr);
    assert.equal(invited.json.email, 'grace@example.com');
    const link = new URL(invited.json.link);
    assert.equal(`${link.origin}${link.pathname}`, 'https://console.example.com/console');
    const token = /^#invite=(.+)$/.exec(link.hash)![1];
    const accepted = await consoleCall(s, 'POST', '/invites/accept', { body: { token, password: 'grace chose this one' } });
    assert.equal(accepted.status, 200);

    const made = await adminWithInput(
      s.dataDir,
      'linus password 42\n',
      'console',
      'login',
      '--account',
      accountId,
      '--email',
      'linus@example.com',
      '--password-stdin',
    );
    assert.equal(made.code, 0, made.stderr);
    await signIn(s, 'linus@example.com', 'linus password 42');

    const list = await admin(s.dataDir, 'console', 'list', '--account', accountId);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      list.json.logins.map((l: { email: string; hasPassword: boolean; liveSessions: number }) => [l.email, l.hasPassword, l.liveSessions]),
      [
        ['grace@example.com', true, 1],
        ['linus@example.com', true, 1],
      ],
    );
    assert.ok(!JSON.stringify(list.json).includes('argon2'), 'no hash is shown');

    const out = await admin(s.dataDir, 'console', 'signout', '--email', 'linus@example.com');
    assert.deepEqual(out.json, { email: 'linus@example.com', endedSessions: 1 });
  });

  it('when console commands get bad arguments, then a clear message and a non-zero exit', async () => {
    const accountId = await s.account();
    const other = await s.account();
    await admin(s.dataDir, 'console', 'invite', '--account', accountId, '--email', 'taken@example.com');
    const cases: Array<[string, string[], RegExp]> = [
      ['', ['console', 'invite', '--account', accountId], /--email is required/],
      ['', ['console', 'invite', '--account', 'acct_missing', '--email', 'a@example.com'], /no account with id acct_missing/],
      ['', ['console', 'invite', '--account', accountId, '--email', 'not-an-email'], /not an email address/],
      ['', ['console', 'invite', '--account', other, '--email', 'taken@example.com'], /already signs in to another account/],
      ['', ['console', 'invite', '--account', accountId, '--email', 'a@example.com', '--base-url', 'ftp://x'], /--base-url must be an http\(s\) URL/],
      ['secret', ['console', 'login', '--account', accountId, '--email', 'b@example.com'], /--password-stdin is required/],
      ['short\n', ['console', 'login', '--account', accountId, '--email', 'b@example.com', '--password-stdin'], /12 to 256 characters/],
      [' '.repeat(12) + '\n', ['console', 'login', '--account', accountId, '--email', 'b@example.com', '--password-stdin'], /must not be only spaces/],
      ['', ['console', 'signout', '--email', 'nobody@example.com'], /no console login for nobody@example.com/],
    ];
    for (const [stdin, args, message] of cases) {
      const r = await adminWithInput(s.dataDir, stdin, ...args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, `${args.join(' ')}: ${r.stderr}`);
    }
  });
});

describe('admin console invite without --base-url', () => {
  const servers = childServers();

  it('when the server runs on a random port, then the invite link points at that port, and after it stops no stale address is used', async () => {
    const { accountId } = await seedUserOnDisk(servers.dataDir);
    const child = await servers.start({ PUBLIC_BASE_URL: '' });
    const invited = await admin(servers.dataDir, 'console', 'invite', '--account', accountId, '--email', 'port@example.com');
    assert.equal(invited.code, 0, invited.stderr);
    const link = new URL(invited.json.link);
    assert.equal(link.origin, new URL(child.url).origin, `the link ${invited.json.link} reaches the server at ${child.url}`);
    assert.equal(link.pathname, '/console');
    const token = /^#invite=(.+)$/.exec(link.hash)![1];
    const page = await fetch(new URL('/console', link));
    assert.equal(page.status, 200, 'the link opens the console of the running server');
    assert.ok(token);

    const override = await admin(
      servers.dataDir,
      'console',
      'invite',
      '--account',
      accountId,
      '--email',
      'port@example.com',
      '--base-url',
      'https://console.example.com',
    );
    assert.equal(new URL(override.json.link).origin, 'https://console.example.com', '--base-url still wins');

    assert.equal(await child.kill('SIGTERM'), 0);
    assert.equal(fs.existsSync(path.join(servers.dataDir, 'server-url.json')), false, 'a stopped server leaves no address behind');
  });

  it('when PUBLIC_BASE_URL is set for the server, then the invite link uses it', async () => {
    const { accountId } = await seedUserOnDisk(servers.dataDir);
    const child = await servers.start({ PUBLIC_BASE_URL: 'https://api.example.com' });
    const invited = await admin(servers.dataDir, 'console', 'invite', '--account', accountId, '--email', 'public@example.com');
    assert.equal(invited.code, 0, invited.stderr);
    assert.match(invited.json.link, /^https:\/\/api\.example\.com\/console#invite=/);
    await child.kill('SIGTERM');
  });
});
