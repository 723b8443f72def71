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
