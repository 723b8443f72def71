/**
 * Network blocks and regional restrictions at the real server: the
 * client address comes from the socket, or from X-Forwarded-For only through
 * the proxies TRUST_PROXY names (here loopback, so tests can speak for any
 * address); a blocked address gets 403 on every operation, before its body is
 * even validated, through any key of the account.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import * as accounts from '../server/domain/accounts.ts';
import * as ledger from '../server/domain/ledger.ts';
import { systemClock } from '../server/domain/clock.ts';

const MODELS = '/api/generate/models';
const IMAGE = '/api/generate/image';
const from = (address: string, extra: Record<string, string> = {}) => ({ 'x-forwarded-for': address, ...extra });
let counter = 0;
const submit = (
  s: TestServer,
  key: string,
  address: string,
  body: unknown = { model: 'gemforge-image-1', prompt: 'a lighthouse', parameters: { resolution: '512' } },
) => s.call('POST', IMAGE, { key, body, headers: from(address, { 'idempotency-key': `net-${++counter}` }) });

async function expectBlocked(res: Response, code: 'NETWORK_BLOCKED' | 'REGION_BLOCKED'): Promise<void> {
  const e = await errorOf(res);
  assert.deepEqual([e.status, e.code, e.keys], [403, code, ['error']], e.message);
}

describe('network blocks and regions behind a trusted proxy', () => {
  let s: TestServer;
  let dir: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-regions-'));
    const regions = path.join(dir, 'regions.txt');
    fs.writeFileSync(regions, '# operator file\n203.0.113.0/24 FR\n203.0.113.128/25, DE\n2001:db8:ff::/48 de-by\n');
    s = await startTestServer({ env: { TRUST_PROXY: 'loopback', REGIONS_FILE: regions } });
  });
  after(async () => {
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when the address is in the deny list, then every operation answers 403 NETWORK_BLOCKED through any key, nothing reserved', async () => {
    const u = await s.user({ gems: 100 });
    const second = await s.key(u.accountId);
    await accounts.updateAccount(s.db, systemClock, u.accountId, { networkDeny: ['198.51.100.0/24', '2001:db8:bad::/48'] });
    for (const key of [u.secret, second.secret]) {
      await expectBlocked(await s.call('GET', MODELS, { key, headers: from('198.51.100.7') }), 'NETWORK_BLOCKED');
      await expectBlocked(await submit(s, key, '198.51.100.7'), 'NETWORK_BLOCKED');
      await expectBlocked(await s.call('GET', MODELS, { key, headers: from('2001:db8:bad::1') }), 'NETWORK_BLOCKED');
      await expectBlocked(await s.call('GET', MODELS, { key, headers: from('::ffff:198.51.100.9') }), 'NETWORK_BLOCKED');
    }
    // Checked right after the key: a broken body from a blocked address hears about the address.
    await expectBlocked(await submit(s, u.secret, '198.51.100.7', { model: 'gemforge-image-1' }), 'NETWORK_BLOCKED');
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.deepEqual([summary.outstandingReservations.count, summary.balance], [0, 100]);

    // Allowed addresses are unchanged: the same request from elsewhere goes through.
    assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from('192.0.2.1') })).status, 200);
    assert.equal((await submit(s, u.secret, '192.0.2.1')).status, 202);
  });

  it('when the account has an allow list, then only its ranges pass (IPv4, IPv6 and IPv4-mapped IPv6)', async () => {
    const u = await s.user();
    await accounts.updateAccount(s.db, systemClock, u.accountId, { networkAllow: ['192.0.2.0/24', '2001:db8:1::/64'] });
    for (const ok of ['192.0.2.44', '::ffff:192.0.2.45', '2001:db8:1::abcd']) {
      assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from(ok) })).status, 200, ok);
    }
    for (const no of ['192.0.3.1', '2001:db8:2::1', '10.0.0.1'])
      await expectBlocked(await s.call('GET', MODELS, { key: u.secret, headers: from(no) }), 'NETWORK_BLOCKED');
    // A client-supplied X-Forwarded-For chain: the rightmost untrusted address is the client's.
    await expectBlocked(await s.call('GET', MODELS, { key: u.secret, headers: from('192.0.2.44, 10.0.0.1') }), 'NETWORK_BLOCKED');
  });

  it('when the region of the address is blocked, then 403 REGION_BLOCKED; the most specific range decides; unknown regions pass unless the account says otherwise', async () => {
    const u = await s.user({ gems: 100 });
    const second = await s.key(u.accountId);
    await accounts.updateAccount(s.db, systemClock, u.accountId, { blockedRegions: ['fr'] });
    for (const key of [u.secret, second.secret]) {
      await expectBlocked(await s.call('GET', MODELS, { key, headers: from('203.0.113.5') }), 'REGION_BLOCKED');
      await expectBlocked(await submit(s, key, '203.0.113.5'), 'REGION_BLOCKED');
    }
    assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from('203.0.113.200') })).status, 200, '203.0.113.128/25 is DE');
    assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from('192.0.2.1') })).status, 200, 'unknown region');

    await accounts.updateAccount(s.db, systemClock, u.accountId, { blockedRegions: ['DE-BY'], unknownRegion: 'block' });
    await expectBlocked(await s.call('GET', MODELS, { key: u.secret, headers: from('2001:db8:ff::1') }), 'REGION_BLOCKED');
    await expectBlocked(await s.call('GET', MODELS, { key: u.secret, headers: from('192.0.2.1') }), 'REGION_BLOCKED');
    assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from('203.0.113.5') })).status, 200, 'FR is allowed now');
    const summary = await ledger.accountSummary(s.db, systemClock, u.accountId, []);
    assert.deepEqual([summary.outstandingReservations.count, summary.balance], [0, 100]);
  });

  it('when an account has no policies, then requests from anywhere go through unchanged', async () => {
    const u = await s.user();
    for (const address of ['203.0.113.5', '198.51.100.7', '2001:db8:ff::1']) {
      assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from(address) })).status, 200);
    }
  });
});

describe('network blocks without a trusted proxy', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('when no proxy is trusted, then X-Forwarded-For is ignored and the socket address decides', async () => {
    const u = await s.user();
    await accounts.updateAccount(s.db, systemClock, u.accountId, { networkDeny: ['198.51.100.0/24'] });
    assert.equal((await s.call('GET', MODELS, { key: u.secret, headers: from('198.51.100.7') })).status, 200, 'a forged header does not block');
    await accounts.updateAccount(s.db, systemClock, u.accountId, { networkAllow: ['198.51.100.0/24'], networkDeny: [] });
    await expectBlocked(await s.call('GET', MODELS, { key: u.secret, headers: from('198.51.100.7') }), 'NETWORK_BLOCKED');
    await accounts.updateAccount(s.db, systemClock, u.accountId, { networkAllow: ['127.0.0.0/8'] });
    assert.equal((await s.call('GET', MODELS, { key: u.secret })).status, 200, 'the socket is loopback');
  });

  it('when the account blocks unknown regions and no regions file is configured, then every address is refused', async () => {
    const u = await s.user();
    await accounts.updateAccount(s.db, systemClock, u.accountId, { unknownRegion: 'block' });
    await expectBlocked(await s.call('GET', MODELS, { key: u.secret }), 'REGION_BLOCKED');
  });
});
