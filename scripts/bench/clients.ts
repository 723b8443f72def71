/**
 * What drives a server in the benchmarks, outside the load process's own
 * start-up (load.ts runs its job when imported): the per-request variation
 * autocannon's `setupRequest` applies, and Node's own HTTP client loop
 * (load.ts's `node` jobs, profile-http.ts, latency-timeline.ts).
 */
import http from 'node:http';
import crypto from 'node:crypto';
import type { LoadJob, LoadResult } from './types.ts';
import { quantile } from './quantile.ts';

const freshKey = () => `bench-${crypto.randomUUID()}`;

let turn = 0;
let bodyTurn = 0;

/** What changes from one request to the next: a fresh Idempotency-Key, the next of `paths`, the next of `bodies`. */
export function varied(job: Pick<LoadJob, 'headers' | 'freshIdempotencyKey' | 'paths' | 'bodies'>): {
  headers?: Record<string, string>;
  path?: string;
  body?: string;
} {
  return {
    ...(job.freshIdempotencyKey && { headers: { ...job.headers, 'idempotency-key': freshKey() } }),
    ...(job.paths && { path: job.paths[turn++ % job.paths.length] }),
    ...(job.bodies && { body: job.bodies[bodyTurn++ % job.bodies.length] }),
  };
}

/**
 * `connections` clients, each sending one request after another for `duration`
 * seconds; latency to the end of the response, or to its first body chunk.
 * `onAnswer` hears each answer's send time (`performance.now()`) and latency.
 */
export async function runNodeClient(job: LoadJob, duration: number, onAnswer?: (sentAt: number, latency: number) => void): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.connections });
  const until = Date.now() + duration * 1000;
  const times: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const once = () =>
    new Promise<void>((resolve) => {
      const sent = performance.now();
      const headers = varied(job).headers ?? job.headers;
      const req = http.request(job.url, { method: job.method, agent, headers }, (res) => {
        statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
        const took = () => {
          const latency = performance.now() - sent;
          times.push(latency);
          onAnswer?.(sent, latency);
        };
        if (job.firstChunk) res.once('data', took);
        res.on('data', () => {});
        res.on('end', () => {
          if (!job.firstChunk) took();
          resolve();
        });
        res.on('error', () => (errors++, resolve()));
      });
      req.on('error', () => (errors++, resolve()));
      req.end(job.body);
    });
  const started = Date.now();
  await Promise.all(
    Array.from({ length: job.connections }, async () => {
      while (Date.now() < until) await once();
    }),
  );
  agent.destroy();
  times.sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return { rps: times.length / ((Date.now() - started) / 1000), p50: round(quantile(times, 0.5)), p99: round(quantile(times, 0.99)), requests: times.length, errors, statuses };
}
