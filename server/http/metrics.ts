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
import { accountsWaiting, jobCounts, oldestQueuedRunAt, reservedGems, taskCounts } from '../storage/metrics.ts';
import { admissionRefusals } from '../domain/admission.ts';
import type { Clock } from '../domain/clock.ts';
import { upstreamErrorCounts } from '../providers/remote/http.ts';

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

function operationOf(req: Request): string {
  const id = (req as Request & { openapi?: { schema?: { operationId?: string } } }).openapi?.schema?.operationId;
  if (id) return id;
  if (req.path.startsWith('/files/')) return 'downloadFile';
  if (req.path === '/healthz' || req.path === '/readyz') return 'health';
  if (req.path.startsWith('/docs') || req.path === '/openapi.yaml') return 'docs';
  return 'other';
}

/** A gauge read from the database at each scrape: one value per row, labelled by the row's fields named `labelNames`. */
function gaugeOf<L extends string>(registry: client.Registry, name: string, help: string, labelNames: L[], read: () => Promise<Array<Record<L, string> & { count: number }>>): void {
  new client.Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      for (const row of await read()) this.set(Object.fromEntries(labelNames.map((l) => [l, row[l]])) as unknown as Partial<Record<L, string>>, row.count);
    },
  });
}

/** A counter read at each scrape from a process-wide map whose keys are its two label values, space-separated. */
function countsOf(registry: client.Registry, name: string, help: string, labelNames: [string, string], counts: ReadonlyMap<string, number>): void {
  new client.Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, n] of counts) {
        const [first, second] = key.split(' ') as [string, string];
        this.inc({ [labelNames[0]]: first, [labelNames[1]]: second }, n);
      }
    },
  });
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
  countsOf(registry, 'gemforge_upstream_errors_total', 'Errors from remote media providers, by provider and kind (retried, refused, lost, unavailable)', ['provider', 'kind'], upstreamErrorCounts);
  gaugeOf(registry, 'gemforge_tasks', 'Media tasks by status', ['status'], () => taskCounts(db));
  gaugeOf(registry, 'gemforge_jobs', 'Worker jobs by lane and state (queued, running, held)', ['lane', 'state'], () => jobCounts(db));
  countsOf(registry, 'gemforge_admission_refusals_total', 'Submissions refused (503 with Retry-After) by this process, by limit (key-rate, account-rate, queued-tasks) and kind (media, text)', ['limit', 'kind'], admissionRefusals);
  gaugeOf(registry, 'gemforge_queue_accounts_waiting', 'Accounts with media jobs queued, by lane: the workers take turns between them', ['lane'], () => accountsWaiting(db));
  new client.Gauge({
    name: 'gemforge_oldest_queued_job_age_seconds',
    help: 'Age of the oldest job waiting in the queue (0 when none waits)',
    registers: [registry],
    async collect() {
      const at = await oldestQueuedRunAt(db);
      this.set(at ? Math.max(0, (clock.now().getTime() - Date.parse(at)) / 1000) : 0);
    },
  });
  new client.Gauge({
    name: 'gemforge_reserved_gems',
    help: 'Gems held in open reservations (allowance and paid)',
    registers: [registry],
    async collect() {
      this.set(await reservedGems(db));
    },
  });
  return {
    observe(req, status, seconds) {
      const operation = operationOf(req);
      requests.inc({ operation, status: String(status) });
      latency.observe({ operation }, seconds);
    },
    async text() {
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
