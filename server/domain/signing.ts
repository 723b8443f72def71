/**
 * Signed output URLs: `/files/{assetId}?expires=<unix>&sig=<hex>`, an HMAC-SHA256
 * over the asset id and expiry. Served without a bearer key.
 *
 * The key is shared by every instance, so any instance verifies what another signed: `SIGNING_SECRET` from
 * configuration (with `SIGNING_SECRET_PREVIOUS` still verifying after a rotation),
 * or else the database's signing keys (created once, rotated with `gemforge admin
 * signing rotate`; retired keys verify until their links expire; each instance
 * re-reads them every few seconds). The old per-disk file in DATA_DIR seeds the
 * database key on upgrade, so links already handed out stay valid.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface UrlSigner {
  /** An absolute URL for `assetId` under `baseUrl`, valid for the configured TTL from `now`. */
  sign(baseUrl: string, assetId: string, now: Date): string;
  /** Checks a presented signature: 'ok', 'expired' or 'invalid'. */
  verify(assetId: string, expires: string | undefined, sig: string | undefined, now: Date): 'ok' | 'expired' | 'invalid';
}

/** The keys a signer holds: `current` signs, every one verifies. */
export interface KeyRing {
  current: Buffer;
  previous: Buffer[];
}

/** A signer over a key ring that may change (a rotation seen by `setKeys`). */
export interface RotatingSigner extends UrlSigner {
  setKeys(ring: KeyRing): void;
}

/** Bound on the signed URLs kept for one expiry second (distinct outputs read within it). */
const MAX_SIGNED_KEPT = 4096;

export function createSigner(ring: Buffer | KeyRing, ttlSeconds: number): RotatingSigner {
  // KeyObjects made once: handed a Buffer, createHmac builds one per call (about 17 µs
  // against 2 µs on Node 24), and a task read signs one URL per output.
  let current: crypto.KeyObject;
  let all: crypto.KeyObject[];
  // A signed URL is a function of the key, base URL, asset and expiry second alone: the URLs of the
  // current expiry second are kept, so reads of one task within a second (pollers, many viewers of
  // one result) sign each output once. An HMAC costs more than a hash (OpenSSL builds a MAC context
  // per call): two outputs' signatures were about 4 % of a task read's CPU.
  let signedFor = 0;
  const signed = new Map<string, string>();
  const setKeys = (keys: KeyRing) => {
    current = crypto.createSecretKey(keys.current);
    all = [current, ...keys.previous.map((k) => crypto.createSecretKey(k))];
    signed.clear();
  };
  setKeys(Buffer.isBuffer(ring) ? { current: ring, previous: [] } : ring);
  const mac = (key: crypto.KeyObject, assetId: string, expires: number) => crypto.createHmac('sha256', key).update(`${assetId}\n${expires}`).digest();
  return {
    setKeys,
    sign(baseUrl, assetId, now) {
      const expires = Math.floor(now.getTime() / 1000) + ttlSeconds;
      if (expires !== signedFor || signed.size >= MAX_SIGNED_KEPT) {
        signed.clear();
        signedFor = expires;
      }
      const kept = `${baseUrl}\n${assetId}`;
      let url = signed.get(kept);
      if (url === undefined) {
        url = `${baseUrl}/files/${encodeURIComponent(assetId)}?expires=${expires}&sig=${mac(current, assetId, expires).toString('hex')}`;
        signed.set(kept, url);
      }
      return url;
    },
    verify(assetId, expires, sig, now) {
      // One canonical form per link: `expires` as the server writes it (no leading zero), `sig` in lower-case hex.
      if (!expires || !/^[1-9][0-9]{0,11}$/.test(expires) || !sig || !/^[0-9a-f]{64}$/.test(sig)) return 'invalid';
      const presented = Buffer.from(sig, 'hex');
      if (!all.some((key) => crypto.timingSafeEqual(mac(key, assetId, Number(expires)), presented))) return 'invalid';
      return Number(expires) * 1000 <= now.getTime() ? 'expired' : 'ok';
    },
  };
}

/** The old per-installation secret file in DATA_DIR, if this installation has one (it seeds the database key). */
export function legacySecret(dataDir: string): string | undefined {
  try {
    const hex = fs.readFileSync(path.join(dataDir, 'server-secret'), 'utf8').trim();
    return /^[0-9a-f]{64}$/.test(hex) ? hex : undefined;
  } catch {
    return undefined;
  }
}
