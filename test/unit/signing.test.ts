/** Signed output URLs (domain/signing.ts): one canonical form per link. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createSigner } from '../../server/domain/signing.ts';

describe('signed URL verification', () => {
  const signer = createSigner(crypto.randomBytes(32), 3600);
  const now = new Date('2026-11-25T00:00:00Z');
  const signed = new URL(signer.sign('http://127.0.0.1:8080', 'asset_0123', now));
  const expires = signed.searchParams.get('expires')!;
  const sig = signed.searchParams.get('sig')!;

  it('when a link is presented as signed, then it verifies', () => {
    assert.equal(signer.verify('asset_0123', expires, sig, now), 'ok');
  });

  it('when expires is written another way for the same number (leading zeros, sign, spaces, decimals), then the link is invalid', () => {
    for (const other of [`0${expires}`, `00${expires}`, `+${expires}`, ` ${expires}`, `${expires}.0`, `${expires} `, '']) {
      assert.equal(signer.verify('asset_0123', other, sig, now), 'invalid', JSON.stringify(other));
    }
  });

  it('when the signature is upper-case hex, then the link is invalid (one canonical form)', () => {
    assert.equal(signer.verify('asset_0123', expires, sig.toUpperCase(), now), 'invalid');
  });

  it('when the link has expired, then it says so', () => {
    assert.equal(signer.verify('asset_0123', expires, sig, new Date(now.getTime() + 3601_000)), 'expired');
  });
});

describe('signed URLs kept for their expiry second', () => {
  const keyA = crypto.randomBytes(32);
  const keyB = crypto.randomBytes(32);
  const at = new Date('2026-11-25T00:00:00.250Z');
  const fresh = (key: Buffer, baseUrl: string, assetId: string, now: Date) => createSigner(key, 60).sign(baseUrl, assetId, now);

  it('when one asset is signed twice in one second, then both URLs are the one a fresh signer writes', () => {
    const signer = createSigner(keyA, 60);
    const first = signer.sign('http://a.test', 'asset_1', at);
    const second = signer.sign('http://a.test', 'asset_1', new Date(at.getTime() + 500));
    assert.equal(first, fresh(keyA, 'http://a.test', 'asset_1', at));
    assert.equal(second, first);
  });

  it('when the second, the base URL or the asset differs, then each URL is signed for its own', () => {
    const signer = createSigner(keyA, 60);
    signer.sign('http://a.test', 'asset_1', at);
    const later = new Date(at.getTime() + 1000);
    assert.equal(signer.sign('http://a.test', 'asset_1', later), fresh(keyA, 'http://a.test', 'asset_1', later));
    assert.equal(signer.sign('http://b.test', 'asset_1', later), fresh(keyA, 'http://b.test', 'asset_1', later));
    assert.equal(signer.sign('http://a.test', 'asset_2', later), fresh(keyA, 'http://a.test', 'asset_2', later));
    assert.notEqual(signer.sign('http://a.test', 'asset_1', later), signer.sign('http://a.test', 'asset_2', later));
  });

  it('when the keys rotate within the second, then the next URL is signed with the new key', () => {
    const signer = createSigner(keyA, 60);
    const before = signer.sign('http://a.test', 'asset_1', at);
    signer.setKeys({ current: keyB, previous: [keyA] });
    const after = signer.sign('http://a.test', 'asset_1', at);
    assert.notEqual(after, before);
    assert.equal(after, fresh(keyB, 'http://a.test', 'asset_1', at));
  });
});
