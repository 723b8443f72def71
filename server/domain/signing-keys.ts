/**
 * Where the URL-signing keys come from: configuration
 * (`SIGNING_SECRET`, `SIGNING_SECRET_PREVIOUS`), or else the database, which
 * every instance on it shares; a database rotation reaches every instance
 * within REFRESH_MS, and retired keys verify for one URL lifetime.
 */
import type { Config } from '../config.ts';
import type { Db } from '../storage/db.ts';
import { ensureSigningKey, signingKeys } from '../storage/signing-keys.ts';
import type { Logger } from '../logger.ts';
import type { Clock } from './clock.ts';
import { createSigner, legacySecret, type KeyRing, type RotatingSigner } from './signing.ts';

const REFRESH_MS = 5000;

export interface RunningSigner {
  signer: RotatingSigner;
  stop(): void;
}

/** The keys the database holds now: the current one and those retired within one URL lifetime. */
export async function databaseKeyRing(db: Db, clock: Clock, ttlSeconds: number): Promise<KeyRing> {
  const since = new Date(clock.now().getTime() - ttlSeconds * 1000).toISOString();
  const { current, previous } = await signingKeys(db, since);
  if (!current) throw new Error('no current URL-signing key in the database');
  return { current: Buffer.from(current.secret, 'hex'), previous: previous.map((k) => Buffer.from(k.secret, 'hex')) };
}

export async function startSigner(
  config: Pick<Config, 'signingSecret' | 'signingSecretPrevious' | 'signedUrlTtlSeconds' | 'dataDir'>,
  db: Db,
  clock: Clock,
  logger: Logger,
): Promise<RunningSigner> {
  if (config.signingSecret) {
    return {
      signer: createSigner({ current: config.signingSecret, previous: config.signingSecretPrevious }, config.signedUrlTtlSeconds),
      stop: () => undefined,
    };
  }
  await ensureSigningKey(db, clock.now().toISOString(), legacySecret(config.dataDir));
  const signer = createSigner(await databaseKeyRing(db, clock, config.signedUrlTtlSeconds), config.signedUrlTtlSeconds);
  const timer = setInterval(() => {
    databaseKeyRing(db, clock, config.signedUrlTtlSeconds)
      .then((ring) => signer.setKeys(ring))
      .catch((err: unknown) => logger.warn({ err }, 'could not re-read the URL-signing keys; keeping the ones held'));
  }, REFRESH_MS);
  timer.unref();
  return { signer, stop: () => clearInterval(timer) };
}
