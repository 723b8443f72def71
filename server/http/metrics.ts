/**
 * Prometheus metrics, with prom-client, loaded only when an
 * operator asked for metrics (nothing is counted otherwise): requests by
 * operation and status with latency histograms; tasks by status, the job queue
 * by lane and state with the age of its oldest waiting job, and the Gems held in
 * open reservations, read from the database at each scrape; upstream errors of
 * the remote media providers and the remote moderation endpoint's fallbacks;
 * the process's own metrics. Served only where an
 * operator asked: on METRICS_PORT (its own listener) or at /metrics with
 * `Authorization: Bearer METRICS_TOKEN` — never public by accident.
 */
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import client from 'prom-client';
import type { Db } from '../storage/db.ts';
import { accountsWaiting, jobCounts, oldestQueuedRunAt, reservedGems, taskCounts } from '../storage/metrics.ts';
import type { Clock } from '../domain/clock.ts';
import type { DeploymentView } from '../providers/routing/deployments.ts';
import { storeErrorCounts } from '../storage/outages.ts';
import { processJobCounts, type JobCounts } from '../worker/counts.ts';

/** Process-wide metrics (one per process, whatever servers it runs). */
const processRegistry = new client.Registry();
client.collectDefaultMetrics({ register: processRegistry, prefix: 'gemforge_' });

export interface ServerMetrics {
  /** Counts one answered request. */
  observe(req: Request, status: number, seconds: number): void;
  /** The exposition text of every metric. */
  text(): Promise<string>;
  contentType: string;
  /** GET /metrics on the main port for `Authorization: Bearer <token>`. */
  endpoint(token: string): (req: Request, res: Response, next: NextFunction) => Promise<void>;
}

/** A database collector that has not answered in this long is counted failed: a scrape does not wait out the pool's timeout. */
const COLLECT_TIMEOUT_MS = 2000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error('timed out')), ms)))]).finally(() => clearTimeout(timer));
}

/** A counter whose values are read at each scrape: `read` gives each series' labels and value. */
function collectedCounter(
  registry: client.Registry,
  name: string,
  help: string,
  labelNames: readonly string[],
  read: () => Iterable<[Record<string, string>, number]>,
): void {
  new client.Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, n] of read()) this.inc(labels, n);
    },
  });
}

/**
 * A counter read at each scrape from a process-wide map whose keys are its
 * label values joined by `separator` (a tab where a value may hold spaces).
 */
function countsOf(registry: client.Registry, name: string, help: string, labelNames: string[], counts: ReadonlyMap<string, number>, separator = ' '): void {
  collectedCounter(registry, name, help, labelNames, () =>
    [...counts].map(([key, n]): [Record<string, string>, number] => {
      const values = key.split(separator);
      return [Object.fromEntries(labelNames.map((label, i) => [label, values[i] ?? ''])), n];
    }),
  );
}

/** Failures of the database and the blob store (object store or local disk), by store and operation. */
function storeMetrics(registry: client.Registry, storeErrors: ReadonlyMap<string, number> = storeErrorCounts): void {
  countsOf(
    registry,
    'gemforge_store_errors_total',
    'Errors of the database and the blob store (object store, local disk), by store and operation',
    ['store', 'operation'],
    storeErrors,
    '\t',
  );
}

/** The metrics of `gemforge worker` on its own listener (WORKER_METRICS_PORT): its jobs, store errors, the process. */
/** A breaker's state as a number: what a dashboard can graph and alert on. */
const BREAKER_VALUE = { closed: 0, open: 1, 'half-open': 2 } as const;

/**
 * The deployments of models with several upstreams (server/providers/routing),
 * read at each scrape: the breaker's state as every process sharing it sees
 * it (open while any of them holds it open, through the database), until when
 * it is held open, and the calls, errors and time spent per deployment, as
 * this process saw them.
 */
function deploymentMetrics(registry: client.Registry, deployments: DeploymentViews | undefined): void {
  const deploymentViews = () => deployments?.views() ?? [];
  const labelNames = ['model', 'deployment', 'provider'] as const;
  const labels = (v: DeploymentView) => ({ model: v.model, deployment: v.deployment, provider: v.provider });
  new client.Gauge({
    name: 'gemforge_upstream_breaker_state',
    help: 'Circuit breaker of each upstream deployment: 0 closed, 1 open, 2 half-open (one probe let through)',
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const v of deploymentViews()) this.set(labels(v), BREAKER_VALUE[v.state]);
    },
  });
  new client.Gauge({
    name: 'gemforge_upstream_breaker_open_until_seconds',
    help: 'Until when some process (this one, an API or a worker) holds the deployment open, as Unix seconds in the shared breaker state; 0 when none does',
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const v of deploymentViews()) this.set(labels(v), v.sharedOpenUntil ? Date.parse(v.sharedOpenUntil) / 1000 : 0);
    },
  });
  const counter = (name: string, help: string, read: (v: DeploymentView) => number) =>
    collectedCounter(registry, name, help, labelNames, () => deploymentViews().map((v): [Record<string, string>, number] => [labels(v), read(v)]));
  counter('gemforge_upstream_deployment_calls_total', 'Attempts sent to each upstream deployment', (v) => v.stats.calls);
  counter(
    'gemforge_upstream_deployment_errors_total',
    'Attempts an upstream deployment did not serve (refused connection, throttled, credentials refused, 5xx, timeout)',
    (v) => v.stats.errors,
  );
  counter(
    'gemforge_upstream_deployment_seconds_total',
    'Time spent in attempts to each upstream deployment (to its first answer); with the calls, the mean latency',
    (v) => v.stats.latencySeconds,
  );
}

/** `jobs`: the counts the worker adds to (the process's unless it was given its own). */
/** `deployments`: the worker's routed deployments (absent: none shown). */
export function createWorkerMetrics(jobs: JobCounts = processJobCounts, deployments?: DeploymentViews): Pick<ServerMetrics, 'text' | 'contentType'> {
  const registry = new client.Registry();
  deploymentMetrics(registry, deployments);
  countsOf(
    registry,
    'gemforge_worker_jobs_total',
    'Jobs of this worker process: claimed, finished, failed, handed back, recovered (from expired leases)',
    ['event'],
    jobs.counts,
    '\t',
  );
  storeMetrics(registry);
  return { text: () => client.Registry.merge([processRegistry, registry]).metrics(), contentType: registry.contentType };
}

function operationOf(req: Request): string {
  const id = (req as Request & { openapi?: { schema?: { operationId?: string } } }).openapi?.schema?.operationId;
  if (id) return id;
  if (req.path.startsWith('/files/')) return 'downloadFile';
  if (req.path === '/healthz' || req.path === '/readyz') return 'health';
  if (req.path.startsWith('/docs') || req.path === '/openapi.yaml') return 'docs';
  return 'other';
}

/** A gauge read from the database before each exposition (`refresh`); `drop` leaves it out when that failed. */
interface DatabaseGauge {
  refresh(): Promise<void>;
  drop(): void;
}

/** A gauge with one value per row read, labelled by the row's fields named `labelNames`. */
function gaugeOf<L extends string>(
  registry: client.Registry,
  name: string,
  help: string,
  labelNames: L[],
  read: () => Promise<Array<Record<L, string> & { count: number }>>,
): DatabaseGauge {
  const gauge = new client.Gauge({ name, help, labelNames, registers: [registry] });
  return {
    async refresh() {
      const rows = await read();
      gauge.reset();
      for (const row of rows) {
        const labels: Partial<Record<L, string>> = {};
        for (const l of labelNames) labels[l] = row[l];
        gauge.set(labels, row.count);
      }
    },
    drop: () => gauge.reset(),
  };
}

/** A gauge of one value. */
function valueOf(registry: client.Registry, name: string, help: string, read: () => Promise<number>): DatabaseGauge {
  const gauge = new client.Gauge({ name, help, registers: [registry] });
  return {
    async refresh() {
      gauge.set(await read());
    },
    drop: () => gauge.reset(),
  };
}

/**
 * The counts a server's /metrics reads, each kept by what it counts and handed
 * here by the composition root (server.ts): absent ones read as none, except
 * the store errors, which are the process's (storage/outages.ts).
 */
export interface ServerCounts {
  /** Remote media providers' errors by "provider kind" (the app's worker adds to them). */
  upstreamErrors?: ReadonlyMap<string, number>;
  /** The app's refused submissions by "limit kind" (domain/admission.ts). */
  admissionRefusals?: ReadonlyMap<string, number>;
  /** Store errors by "store\toperation". */
  storeErrors?: ReadonlyMap<string, number>;
  /** The remote moderation endpoint's failures by "mode fallback" (moderation/second-opinion.ts). */
  moderationFallbacks?: ReadonlyMap<string, number>;
  /** The app's routed deployments and their breakers (providers/routing/deployments.ts). */
  deployments?: DeploymentViews;
}

/** What /metrics reads of the routed deployments. */
export interface DeploymentViews {
  views(): DeploymentView[];
}

export function createServerMetrics(db: Db, clock: Clock, counts: ServerCounts = {}): ServerMetrics {
  const registry = new client.Registry();
  const requests = new client.Counter({
    name: 'gemforge_http_requests_total',
    help: 'Answered requests, by operation and status',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
  });
  const latency = new client.Histogram({
    name: 'gemforge_http_request_duration_seconds',
    help: 'Time to answer, by operation',
    labelNames: ['operation'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  countsOf(
    registry,
    'gemforge_upstream_errors_total',
    'Errors from remote media providers, by provider and kind (retried, refused, lost, unavailable)',
    ['provider', 'kind'],
    counts.upstreamErrors ?? new Map(),
  );
  countsOf(
    registry,
    'gemforge_moderation_remote_fallbacks_total',
    'Requests whose remote moderation endpoint failed, by MODERATION_MODE and the MODERATION_REMOTE_FALLBACK applied (closed: refused 503/502; open: the embedded verdict stood)',
    ['mode', 'fallback'],
    counts.moderationFallbacks ?? new Map(),
  );
  deploymentMetrics(registry, counts.deployments);
  countsOf(
    registry,
    'gemforge_admission_refusals_total',
    'Submissions refused (503 with Retry-After) by this process, by limit (key-rate, account-rate, queued-tasks) and kind (media, text)',
    ['limit', 'kind'],
    counts.admissionRefusals ?? new Map(),
  );
  storeMetrics(registry, counts.storeErrors);
  // Read from the database before each exposition, each on its own: a database that is down
  // (or one slow query) drops those series and counts the failure, the rest is served.
  const collectors: Record<string, DatabaseGauge> = {
    tasks: gaugeOf(registry, 'gemforge_tasks', 'Media tasks by status', ['status'], () => taskCounts(db)),
    jobs: gaugeOf(registry, 'gemforge_jobs', 'Worker jobs by lane and state (queued, running, held)', ['lane', 'state'], () => jobCounts(db)),
    accounts_waiting: gaugeOf(
      registry,
      'gemforge_queue_accounts_waiting',
      'Accounts with media jobs queued, by lane: the workers take turns between them',
      ['lane'],
      () => accountsWaiting(db),
    ),
    oldest_queued_job: valueOf(
      registry,
      'gemforge_oldest_queued_job_age_seconds',
      'Age of the oldest job waiting in the queue (0 when none waits)',
      async () => {
        const at = await oldestQueuedRunAt(db);
        return at ? Math.max(0, (clock.now().getTime() - Date.parse(at)) / 1000) : 0;
      },
    ),
    reserved_gems: valueOf(registry, 'gemforge_reserved_gems', 'Gems held in open reservations (allowance and paid)', () => reservedGems(db)),
  };
  const failures = new client.Counter({
    name: 'gemforge_metrics_collection_failures_total',
    help: 'Scrapes at which a collector could not read its values (database down or slow); its series were left out',
    labelNames: ['collector'] as const,
    registers: [registry],
  });
  async function collectDatabase(): Promise<void> {
    await Promise.all(
      Object.entries(collectors).map(async ([name, gauge]) => {
        try {
          await withTimeout(gauge.refresh(), COLLECT_TIMEOUT_MS);
        } catch {
          gauge.drop();
          failures.inc({ collector: name });
        }
      }),
    );
  }
  return {
    observe(req, status, seconds) {
      const operation = operationOf(req);
      requests.inc({ operation, status: String(status) });
      latency.observe({ operation }, seconds);
    },
    async text() {
      await collectDatabase();
      return client.Registry.merge([processRegistry, registry]).metrics();
    },
    contentType: registry.contentType,
    endpoint(token) {
      return metricsEndpoint(this, token);
    },
  };
}

/** GET /metrics on the main port, only with `Authorization: Bearer <token>` (compared in constant time). */
function metricsEndpoint(metrics: Pick<ServerMetrics, 'text' | 'contentType'>, token: string) {
  const expected = crypto.createHash('sha256').update(token).digest();
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if (req.path !== '/metrics' || req.method !== 'GET') return next();
    const presented = /^Bearer (.+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '';
    if (!crypto.timingSafeEqual(crypto.createHash('sha256').update(presented).digest(), expected)) {
      res.status(401).set('www-authenticate', 'Bearer').json({ error: 'metrics need the operator token (METRICS_TOKEN)' });
      return;
    }
    res.set('content-type', metrics.contentType).send(await metrics.text());
  };
}
