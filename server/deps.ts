/**
 * What the app is built from (the composition root, server.ts, builds it; tests
 * build it on a temporary data dir). Types only: the routers and middleware
 * import it without importing the app that imports them, so no import circle
 * runs through the wiring.
 */
import type { Config } from './config.ts';
import type { Db } from './storage/db.ts';
import type { Logger } from './logger.ts';
import type { Clock } from './domain/clock.ts';
import type { Catalog } from './domain/catalog.ts';
import type { InflightWork } from './lifecycle.ts';
import type { ConsolePage } from './routes/console-page.ts';
import type { PasswordHasher } from './domain/password-pool.ts';
import type { UrlSigner } from './domain/signing.ts';
import type { ModerationProvider } from './providers/moderation/types.ts';
import type { MediaProviders } from './providers/media-types.ts';
import type { Lifecycle } from './routes/health.ts';
import type { ServerMetrics } from './http/metrics.ts';
import type { TextProviders } from './providers/text/types.ts';
import type { AnalysisProvider } from './providers/analysis/types.ts';
import type { RegionMap } from './domain/policy/regions.ts';
import type { Blobs } from './storage/blobs.ts';
import type { AdmissionLimits } from './domain/admission.ts';

export interface AppDeps {
  config: Config;
  db: Db;
  /** The blob store (DATA_DIR/blobs, or the object store BLOB_STORE=s3 names), built once at the composition root. */
  blobs: Blobs;
  logger: Logger;
  clock: Clock;
  catalog: Catalog;
  signer: UrlSigner;
  /** Account policies: the moderation provider and the operator's CIDR → region map. */
  policies: { moderation: ModerationProvider; regions: RegionMap };
  /** The text and analysis providers, built at the composition root (server.ts) from the config. */
  providers: { text: TextProviders; analysis: AnalysisProvider };
  /** Admission of submissions: the configured rates and caps, and this app's count of refusals (/metrics). */
  admission: AdmissionLimits;
  /** Background work a shutdown waits for (text generations settling). */
  inflight?: InflightWork;
  /** The media providers the worker runs (each remote model's own in `byModel`), the scenario layer composed in: a submission asks the model's one (its submission hooks: checks, lane, voices). */
  mediaProviders: MediaProviders;
  /** Whether a shutdown is draining (readiness, Connection: close). */
  lifecycle?: Lifecycle;
  /** Request and state metrics (/metrics with METRICS_TOKEN, or METRICS_PORT). */
  metrics?: ServerMetrics;
  /** The account console page, built at start (console-page/build.ts); without it /console answers 503. */
  consolePage?: ConsolePage;
  /** Console passwords, hashed and checked off the event loop (domain/password-pool.ts). */
  passwords: PasswordHasher;
}
