/**
 * Prometheus metrics (issue 27, item 5), with prom-client, loaded only when an
 * operator asked for metrics (nothing is counted otherwise): requests by
 * operation and status with latency histograms; tasks by status, the job queue
 * by lane and state with the age of its oldest waiting job, and the Gems held in
 * open reservations, read from the database at each scrape; upstream errors of
 * the remote media providers; the process's own metrics. Served only where an
 * operator asked: on METRICS_PORT (its own listener) or at /metrics with
 * `Authorization: Bearer METRICS_TOKEN` — never public by accident.
 */
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import client from 'prom-client';
import type { Db } from '../storage/db.ts';
import { jobCounts, oldestQueuedRunAt, reservedGems, taskCounts } from '../storage/metrics.ts';
import type { Clock } from '../domain/clock.ts';
import { upstreamErrorCounts } from '../providers/remote/http.ts';
import { storeErrorCounts } from '../storage/outages.ts';
import { workerJobCounts } from '../worker/counts.ts';

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

/** Counters read from one of the process's own tallies (a map of "a\tb" keys, or plain keys) at each scrape. */
function tallyCounter(registry: client.Registry, name: string, help: string, labelNames: string[], tally: Map<string, number>): void {
  new client.Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, n] of tally) {
        const values = key.split('\t');
        this.inc(Object.fromEntries(labelNames.map((label, i) => [label, values[i] ?? ''])), n);
      }
    },
  });
}

/** Failures of the database and the blob store (object store or local disk), by store and operation. */
function storeMetrics(registry: client.Registry): void {
  tallyCounter(registry, 'gemforge_store_errors_total', 'Errors of the database and the blob store (object store, local disk), by store and operation', ['store', 'operation'], storeErrorCounts);
}

/** The metrics of `gemforge worker` on its own listener (WORKER_METRICS_PORT): its jobs, store errors, the process. */
export function createWorkerMetrics(): Pick<ServerMetrics, 'text' | 'contentType'> {
  const registry = new client.Registry();
  tallyCounter(registry, 'gemforge_worker_jobs_total', 'Jobs of this worker process: claimed, finished, failed, handed back, recovered (from expired leases)', ['event'], workerJobCounts as Map<string, number>);
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

export function createServerMetrics(db: Db, clock: Clock): ServerMetrics {
  const registry = new client.Registry();
  const requests = new client.Counter({ name: 'gemforge_http_requests_total', help: 'Answered requests, by operation and status', labelNames: ['operation', 'status'] as const, registers: [registry] });
  const latency = new client.Histogram({
    name: 'gemforge_http_request_duration_seconds',
    help: 'Time to answer, by operation',
    labelNames: ['operation'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  new client.Counter({
    name: 'gemforge_upstream_errors_total',
    help: 'Errors from remote media providers, by provider and kind (retried, refused, lost, unavailable)',
    labelNames: ['provider', 'kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, n] of upstreamErrorCounts) {
        const [provider, kind] = key.split(' ') as [string, string];
        this.inc({ provider, kind }, n);
      }
    },
  });
  const tasks = new client.Gauge({ name: 'gemforge_tasks', help: 'Media tasks by status', labelNames: ['status'] as const, registers: [registry] });
  const jobs = new client.Gauge({ name: 'gemforge_jobs', help: 'Worker jobs by lane and state (queued, running, held)', labelNames: ['lane', 'state'] as const, registers: [registry] });
  const oldest = new client.Gauge({ name: 'gemforge_oldest_queued_job_age_seconds', help: 'Age of the oldest job waiting in the queue (0 when none waits)', registers: [registry] });
  const reserved = new client.Gauge({ name: 'gemforge_reserved_gems', help: 'Gems held in open reservations (allowance and paid)', registers: [registry] });
  storeMetrics(registry);
  // Read from the database before each exposition, each on its own: a database that is down
  // (or one slow query) drops those series and counts the failure, the rest is served.
  const collectors: Record<string, () => Promise<void>> = {
    tasks: async () => {
      const rows = await taskCounts(db);
      tasks.reset();
      for (const { status, count } of rows) tasks.set({ status }, count);
    },
    jobs: async () => {
      const rows = await jobCounts(db);
      jobs.reset();
      for (const { lane, state, count } of rows) jobs.set({ lane, state }, count);
    },
    oldest_queued_job: async () => {
      const at = await oldestQueuedRunAt(db);
      oldest.set(at ? Math.max(0, (clock.now().getTime() - Date.parse(at)) / 1000) : 0);
    },
    reserved_gems: async () => {
      reserved.set(await reservedGems(db));
    },
  };
  const failures = new client.Counter({
    name: 'gemforge_metrics_collection_failures_total',
    help: 'Scrapes at which a collector could not read its values (database down or slow); its series were left out',
    labelNames: ['collector'] as const,
    registers: [registry],
  });
  const dropped: Record<string, () => void> = { tasks: () => tasks.reset(), jobs: () => jobs.reset(), oldest_queued_job: () => oldest.reset(), reserved_gems: () => reserved.reset() };
  async function collectDatabase(): Promise<void> {
    await Promise.all(
      Object.entries(collectors).map(async ([name, collect]) => {
        try {
          await withTimeout(collect(), COLLECT_TIMEOUT_MS);
        } catch {
          dropped[name]!();
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
