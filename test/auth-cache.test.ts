/**
 * The key cache (domain/principal-cache.ts) keeps its rule: a
 * revocation, an account block or an expiry takes effect within one second,
 * also when another process made the change; in-process changes at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { changeElsewhere, timeToStatus } from './helpers/auth.ts';
import { ManualClock } from './helpers/db.ts';
import * as accounts from '../server/domain/accounts.ts';

const MODELS = '/api/generate/models';

describe('key cache', () => {
  const clock = new ManualClock(new Date());
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(() => s.close());

  /**
   * Uses a key (so the server caches it), has another process make `change`, and
   * returns how long until the key hears `status`, timed from the moment the
   * change is asked for, which is before it commits.
   */
  async function refusedAfter(change: 'revoke' | 'block', status: number): Promise<{ status: number; ms: number; secret: string }> {
    const user = await s.user();
    const other = await changeElsewhere(s.dataDir, change, change === 'revoke' ? user.keyId : user.accountId);
    assert.equal((await s.call('GET', MODELS, { key: user.secret })).status, 200, 'the key is cached now');
    const committed = other.go();
    const refused = await timeToStatus(() => s.call('GET', MODELS, { key: user.secret }), status, 3000);
    await committed;
    return { ...refused, secret: user.secret };
  }

  it('when another process revokes a key the server has just used, then the key is refused within one second', async () => {
    const refused = await refusedAfter('revoke', 401);
    assert.equal(refused.status, 401);
    assert.ok(refused.ms <= 1000, `refused after ${refused.ms.toFixed(0)} ms`);
  });

  it('when another process blocks an account the server has just served, then its keys hear ACCOUNT_BLOCKED within one second', async () => {
    const refused = await refusedAfter('block', 403);
    assert.equal(refused.status, 403);
    assert.ok(refused.ms <= 1000, `refused after ${refused.ms.toFixed(0)} ms`);
    assert.equal((await errorOf(await s.call('GET', MODELS, { key: refused.secret }))).code, 'ACCOUNT_BLOCKED');
  });

  it('when a cached key passes its expiry, then the very next request is refused', async () => {
    const accountId = await s.account();
    const key = await s.key(accountId, { expiresAt: new Date(clock.now().getTime() + 60_000) });
    assert.equal((await s.call('GET', MODELS, { key: key.secret })).status, 200, 'the key is cached now');
    clock.advance(60_000);
    assert.equal((await errorOf(await s.call('GET', MODELS, { key: key.secret }))).code, 'INVALID_API_KEY');
  });

  it('when this process revokes a cached key, then the very next request is refused', async () => {
    const user = await s.user();
    assert.equal((await s.call('GET', MODELS, { key: user.secret })).status, 200, 'the key is cached now');
    await accounts.revokeKey(s.db, clock, user.keyId);
    assert.equal((await s.call('GET', MODELS, { key: user.secret })).status, 401);
  });

  it('when a key unknown a moment ago is created, then it works at once (unknown keys are never cached)', async () => {
    const accountId = await s.account();
    const secret = `gf_${'a'.repeat(64)}`;
    assert.equal((await s.call('GET', MODELS, { key: secret })).status, 401);
    const { secret: fresh } = await s.key(accountId);
    assert.equal((await s.call('GET', MODELS, { key: fresh })).status, 200);
  });
});
