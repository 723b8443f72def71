/**
 * Starting and stopping a whole server: database, catalog, app, listener.
 * `main.ts` uses it for `npm start`; tests use it on port 0 with a temp DATA_DIR.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import { createApp } from './app.ts';
import { appServer } from './http/app-server.ts';
import { InflightWork } from './lifecycle.ts';
import { openDb, type Db } from './storage/db.ts';
import { createLogger, type Logger } from './logger.ts';
import { loadCatalog } from './domain/catalog.ts';
import { seedCatalogVoices } from './domain/voices.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import { listenBaseUrl, recordServerUrl } from './public-url.ts';
import { startSigner } from './domain/signing-keys.ts';
import type { UrlSigner } from './domain/signing.ts';
import { assetLink } from './domain/assets.ts';
import { defaultMediaProviders, type MediaProviders } from './providers/media.ts';
import { startWorker, type RunningWorker } from './worker/worker.ts';
import type { JobCounts } from './worker/counts.ts';
import { loadModerationPolicy } from './providers/moderation/policy-file.ts';
import { createRemoteMedia, discoveredCatalog, PROVIDER_NAMES, type RemoteMedia } from './providers/remote/index.ts';
import { UpstreamErrorCounts } from './providers/remote/http.ts';
import { processReadLimits } from './providers/remote/read-limit.ts';
import { AdmissionRefusals } from './domain/admission.ts';
import { storeErrorCounts } from './storage/outages.ts';
import { withAnalysisScenarios, withScenarioLayer, withTextScenarios } from './domain/scenario-provider.ts';
import type { ServerMetrics } from './http/metrics.ts';
import { localBlobs, tempPath, type Blobs } from './storage/blobs.ts';
import { moderationProviderFor } from './providers/moderation/index.ts';
import { RemoteFallbacks } from './providers/moderation/second-opinion.ts';
import { offThread } from './providers/moderation/off-thread.ts';
import { loadRegions } from './domain/policy/regions.ts';
import { answerClientErrors } from './http/client-error.ts';
import { closeWhenUnread } from './http/connection.ts';
import { createTextProviders } from './providers/text/index.ts';
import { createAnalysisProvider } from './providers/analysis/index.ts';
import { buildConsolePage } from './console-page/build.ts';
import { privateDataDir, widerThanPrivate } from './storage/data-dir.ts';
import { passwordPool } from './domain/password-pool.ts';
import { reduceMemoryWhenQuiet } from './memory.ts';
import { Deployments } from './providers/routing/deployments.ts';
import { openBreakers, writeBreaker } from './storage/breakers.ts';

export interface RunningServer {
  url: string;
  port: number;
  db: Db;
  logger: Logger;
  /**
   * Stops accepting connections, lets in-flight requests and text generations
   * finish for up to `graceMs` (default 0: cut them off), then closes the rest,
   * stops the worker and closes the database.
   */
  /** The metrics listener's base URL, when METRICS_PORT is set. */
  metricsUrl?: string;
  /** The app's routed deployments and their breakers (what /metrics shows of them). */
  deployments: Deployments;
  close(options?: { graceMs?: number; readinessDelayMs?: number }): Promise<void>;
}

/**
 * express-openapi-validator does not fail at start-up on an invalid contract: it
 * answers every request 500 instead. One request with no bearer key proves the
 * contract loaded (it must answer 401) and warms the validator up.
 */
async function selfCheck(url: string, server: http.Server, db: Db): Promise<void> {
  // A header that is not a bearer key: the validator itself must answer (a request with
  // none at all is answered before it, by http/missing-key.ts, and would prove nothing).
  // Through node:http, not fetch: the first fetch in a process loads and compiles Node's
  // bundled undici (~100 ms of a start), which nothing else on the way to serving needs.
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.get(
      `${url}/api/generate/models`,
      { agent: false, headers: { 'x-request-id': 'startup-self-check', authorization: 'Basic startup-self-check' } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
        res.once('error', reject);
      },
    );
    req.once('error', reject);
  });
  if (status !== 401) {
    server.closeAllConnections();
    server.close();
    await db.destroy();
    throw new Error(`the contract did not load (self-check answered ${status}); run "npm run lint:contract"`);
  }
}

/**
 * The installation's blob store, built once per app or worker: S3-compatible
 * storage when BLOB_STORE=s3, after checking the bucket answers (a wrong
 * endpoint, bucket or credentials stop the start with a message), else
 * DATA_DIR/blobs.
 */
export async function configureBlobStore(config: Config): Promise<Blobs> {
  if (config.blobStore !== 's3') return localBlobs(config.dataDir);
  // The AWS SDK is loaded only when asked for: it adds tens of MiB to every process that imports it.
  const { s3BlobStore } = await import('./storage/s3-blobs.ts');
  const store = s3BlobStore(config.s3);
  try {
    await store.check();
  } catch (error) {
    throw new Error(`BLOB_STORE=s3: ${store.description} cannot be reached: ${(error as Error).name}: ${(error as Error).message}`);
  }
  return { dataDir: config.dataDir, remote: store };
}

/** The metrics listener of its own (METRICS_PORT, or `gemforge worker`'s WORKER_METRICS_PORT): GET /metrics and /healthz, nothing else. */
export async function listenMetrics(metrics: Pick<ServerMetrics, 'text' | 'contentType'>, host: string, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end('{"status":"ok"}');
      return;
    }
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    metrics.text().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/**
 * The media providers of a deployment: the embedded generators by kind (or the
 * given ones) and each remote model's own provider (unless the given ones name
 * their own), with the scenario layer composed around every one, so test cards
 * play the same with local and remote providers. The API asks them at
 * submission (their submission hooks: checks, lane, voices), the worker runs them.
 */
function mediaProvidersOf(remote: RemoteMedia, given?: MediaProviders): MediaProviders {
  return withScenarioLayer(given ? { byModel: remote.byModel, ...given } : { ...defaultMediaProviders(), byModel: remote.byModel });
}

/**
 * Starts the media worker on a database (in the server, or alone with `gemforge worker`),
 * with the server's providers (scenario layer included) or the deployment's own.
 */
export function startMediaWorker(
  config: Config,
  db: Db,
  logger: Logger,
  clock: Clock,
  layered: MediaProviders | undefined,
  extras: { signer?: UrlSigner; upstreamErrors?: UpstreamErrorCounts; blobs: Blobs; jobCounts?: JobCounts; deployments: Deployments },
): RunningWorker {
  const { signer, upstreamErrors, blobs, jobCounts, deployments } = extras;
  // A broken provider entry in the catalog stops the start.
  const providers = layered ?? mediaProvidersOf(createRemoteMedia(config, loadCatalog(config.catalogPath, PROVIDER_NAMES), processReadLimits, deployments));
  return startWorker({
    db,
    clock,
    logger,
    providers,
    ...(upstreamErrors && { upstreamErrors }),
    blobs,
    ...(jobCounts && { jobCounts }),
    remoteConcurrency: Object.keys(providers.byModel ?? {}).length > 0 ? config.workerRemoteConcurrency : 0,
    dataDir: config.dataDir,
    ffmpegPath: config.ffmpegPath,
    ffprobePath: config.ffprobePath,
    outputRetentionSeconds: config.outputRetentionSeconds,
    concurrency: config.workerConcurrency,
    leaseMs: config.workerLeaseMs,
    pollMs: config.workerPollMs,
    retryBackoffMs: config.workerRetryBackoffMs,
    storeRetries: config.workerStoreRetries,
    accountCaps: { local: config.accountLocalConcurrency, remote: config.accountRemoteConcurrency },
    // Source and reference media reach a mapped upstream only as signed links under a public base URL.
    ...(signer &&
      config.publicBaseUrl && {
        assetLink: (accountId: string, assetId: string) => assetLink(db, signer, config.publicBaseUrl!, clock.now(), accountId, assetId),
      }),
  });
}

/**
 * Shares the breakers of `deployments` (an app's or a worker's) with the other
 * processes on the database (an API and a separate `gemforge worker`): each
 * one's open breakers reach every `admit`. Returns the stop, called before the
 * database closes.
 */
export function shareBreakerState(db: Db, logger: Logger, deployments: Deployments): () => void {
  let quietUntil = 0;
  const sharing = deployments.shared.share(
    {
      // Wall-clock time, like the breakers' own: the moments are compared across processes.
      readOpen: () => openBreakers(db, new Date()),
      write: (model, deployment, openedUntil) => writeBreaker(db, model, deployment, openedUntil, new Date()),
    },
    {
      onError(err, what) {
        // Once a minute at most: a database outage is logged by every other path too.
        if (Date.now() < quietUntil) return;
        quietUntil = Date.now() + 60_000;
        logger.warn(
          { err, store: 'database' },
          `the shared upstream breaker state could not be ${what === 'read' ? 'read' : 'written'}; this process goes by its own breakers meanwhile`,
        );
      },
    },
  );
  return () => sharing.stop();
}

/** DATA_DIR made (0700) and everything written from now on private; a wider existing directory is reported. */
export function guardDataDir(dataDir: string, logger: Logger): void {
  privateDataDir(dataDir);
  const mode = widerThanPrivate(dataDir);
  if (mode)
    logger.warn({ dataDir, mode }, `DATA_DIR lets other users in (mode ${mode}): run chmod 700 on it; what gemforge writes in it is private to its user`);
}

/** How soon after a drain starts idle keep-alive connections are closed (see close()). */
const IDLE_CLOSE_DELAY_MS = 100;

export async function startServer(config: Config, options: { clock?: Clock; providers?: MediaProviders } = {}): Promise<RunningServer> {
  const logger = createLogger(config.logLevel);
  guardDataDir(config.dataDir, logger);
  const catalog = loadCatalog(config.catalogPath, PROVIDER_NAMES);
  // The app's routed deployments: its providers register theirs, the breaker sharing and /metrics read them.
  const deployments = new Deployments();
  // Remote media providers are checked before the database opens: a model naming an unconfigured one stops the start.
  const remoteMedia = createRemoteMedia(config, catalog, processReadLimits, deployments);
  // Likewise a text model's broken deployments list.
  const textProviders = createTextProviders(config, catalog, deployments);
  // A broken moderation policy or regions file stops the start, before the database opens.
  const moderationPolicy = loadModerationPolicy(config.moderationPolicyPath);
  // Long texts are judged on worker threads, started at the first one; close() ends them.
  const moderationThreads = offThread(moderationPolicy, { ...config.moderationThreads, classifier: config.moderationClassifier });
  // The remote moderation endpoint's failures, counted for this app's /metrics.
  const moderationFallbacks = new RemoteFallbacks();
  const policies = {
    moderation: moderationProviderFor(moderationPolicy, config, moderationThreads, moderationFallbacks),
    regions: loadRegions(config.regionsFile),
  };
  // The console page's script is bundled before the database opens (a broken page stops the start).
  const consolePage = await buildConsolePage();
  const blobs = await configureBlobStore(config);
  const db = await openDb({ ...config, log: logger });
  const clock = options.clock ?? systemClock;
  // The public voices exist before the first request (a bad voice catalog stops the start).
  try {
    await seedCatalogVoices(db, clock, config.voiceCatalogPath);
  } catch (error) {
    await db.destroy();
    throw error;
  }
  let signing;
  try {
    signing = await startSigner(config, db, clock, logger);
  } catch (error) {
    await db.destroy();
    throw error;
  }
  const { signer } = signing;
  const inflight = new InflightWork();
  // Every provider with the scenario layer composed around it (scenario-provider.ts).
  const mediaProviders = mediaProvidersOf(remoteMedia, options.providers);
  const providers = {
    text: withTextScenarios(textProviders),
    analysis: withAnalysisScenarios(createAnalysisProvider(config, (suffix) => tempPath(config.dataDir, suffix))),
  };
  const lifecycle = { draining: false };
  // The app's counts: its worker's jobs add to the remote providers' errors, its submissions to the refusals; /metrics reads both.
  const upstreamErrors = new UpstreamErrorCounts();
  const admission = { rates: config.rates, accountQueuedTasks: config.accountQueuedTasks, refusals: new AdmissionRefusals() };
  // Metrics only where an operator asked for them (prom-client loaded, requests counted).
  const metrics =
    config.metricsToken || config.metricsPort !== undefined
      ? (await import('./http/metrics.ts')).createServerMetrics(db, clock, {
          upstreamErrors: upstreamErrors.counts,
          admissionRefusals: admission.refusals.counts,
          storeErrors: storeErrorCounts,
          moderationFallbacks: moderationFallbacks.counts,
          deployments,
        })
      : undefined;
  // Its threads start at the first sign-in; close() ends them.
  const passwords = passwordPool(config.consoleHashing);
  const app = createApp({
    config,
    db,
    blobs,
    admission,
    logger,
    clock,
    catalog: discoveredCatalog(catalog, remoteMedia),
    signer,
    inflight,
    policies,
    providers,
    mediaProviders,
    lifecycle,
    metrics,
    consolePage,
    passwords,
  });
  const metricsServer = metrics && config.metricsPort !== undefined ? await listenMetrics(metrics, config.metricsHost, config.metricsPort) : undefined;
  const server = appServer(app);
  // Malformed HTTP, oversized headers, slow clients, unknown Expect: the envelope, never Node's bare answer.
  answerClientErrors(server, logger);
  // An answer that leaves its request's body unread, or any answer while draining, closes its connection.
  closeWhenUnread(server, lifecycle);
  // Responses in flight, so a shutdown can wait for them (and not for idle keep-alive connections).
  let active = 0;
  let onIdle: (() => void) | undefined;
  // One listener for all responses ('close' comes once per response): no closure and `once` wrapper per request.
  const ended = () => {
    if (--active === 0) onIdle?.();
  };
  server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    active++;
    res.on('close', ended);
  });
  // Longer than common client and proxy idle timeouts, so a pooled connection is
  // not closed by the server just as a client reuses it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  await selfCheck(url, server, db);
  // Where the admin CLI's invite links point (public-url.ts); a data dir we cannot write only costs that.
  let urlRecord: { remove(): void } | undefined;
  try {
    urlRecord = recordServerUrl(config.dataDir, config.publicBaseUrl ?? listenBaseUrl(config.host, port), clock.now());
  } catch (error) {
    logger.warn({ err: error }, 'could not record the server URL in DATA_DIR: admin console invite needs --base-url');
  }
  // Start-up's garbage and grown young generation go back to the system once requests pause (memory.ts).
  const stopReducing = reduceMemoryWhenQuiet(server, () => active > 0, {
    onCollect: (ms) => logger.debug({ ms: Math.round(ms) }, 'memory reduced while quiet'),
  });
  // Open breakers reach every process on the database (this API's admission, a separate worker's calls).
  const stopSharing = shareBreakerState(db, logger, deployments);
  // The worker runs the providers built above (the catalog is read once).
  const worker = config.workerEnabled ? startMediaWorker(config, db, logger, clock, mediaProviders, { signer, upstreamErrors, blobs, deployments }) : undefined;
  logger.info({ url, dataDir: config.dataDir, database: config.databaseUrl ? 'postgres' : 'sqlite', worker: Boolean(worker) }, 'gemforge listening');
  let closed = false;
  return {
    url,
    port,
    db,
    logger,
    deployments,
    ...(metricsServer && { metricsUrl: `http://${config.metricsHost}:${(metricsServer.address() as AddressInfo).port}` }),
    async close({ graceMs = 0, readinessDelayMs = 0 } = {}) {
      if (closed) return;
      closed = true;
      urlRecord?.remove();
      stopReducing();
      lifecycle.draining = true; // /readyz answers 503 and answers close their connections from now on
      // Idle keep-alive connections go at once, while the listener still answers: their clients reconnect
      // (to another instance) for the next request. A moment later, not in this tick: a request a client
      // already wrote on a pooled connection is then read and answered (with Connection: close), not cut off.
      setTimeout(() => server.closeIdleConnections(), IDLE_CLOSE_DELAY_MS).unref();
      // Still listening for a moment, so a balancer polling /readyz sees the drain before connections are refused.
      if (readinessDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, readinessDelayMs));
      const deadline = Date.now() + graceMs;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      if (graceMs > 0 && active > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([new Promise<void>((resolve) => (onIdle = resolve)), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
        clearTimeout(timer);
      }
      server.closeAllConnections();
      await stopped;
      logger.info({ generations: inflight.size }, 'http server closed');
      // A generation whose client is gone still settles; give it what is left of the grace.
      if (!(await inflight.drain(deadline - Date.now()))) {
        logger.warn({ generations: inflight.size }, 'shutting down with text generations unsettled: their identities stay pending (REQUEST_UNCERTAIN)');
      }
      await worker?.stop();
      stopSharing();
      await passwords.close();
      await moderationThreads.close();
      signing.stop();
      if (metricsServer) await new Promise((resolve) => metricsServer.close(resolve));
      await db.destroy();
      logger.info('stopped');
    },
  };
}
