/**
 * The load generator, run as its own process (pinned to another core than the
 * server by bench-http.ts): one JSON job in argv[2], one JSON result on stdout.
 * `autocannon` jobs drive a fixed request (optionally with a fresh
 * Idempotency-Key each, or over several paths in turn); `node` jobs use
 * node:http's own client, for what autocannon cannot measure: HEAD (its parser
 * waits for a body the headers announce) and the time to the first chunk of a
 * stream (`firstChunk`).
 */
import http from 'node:http';
import crypto from 'node:crypto';
import autocannon from 'autocannon';
import type { LoadJob, LoadResult } from './types.ts';
import { cpuSeconds } from './cpu.ts';
import { quantile } from './quantile.ts';

const freshKey = () => `bench-${crypto.randomUUID()}`;

let turn = 0;

/** What changes from one request to the next: a fresh Idempotency-Key, the next of `paths`. */
function varied(job: LoadJob): { headers?: Record<string, string>; path?: string } {
  return {
    ...(job.freshIdempotencyKey && { headers: { ...job.headers, 'idempotency-key': freshKey() } }),
    ...(job.paths && { path: job.paths[turn++ % job.paths.length] }),
  };
}

async function runAutocannon(job: LoadJob, duration: number): Promise<LoadResult> {
  const headers = { ...job.headers };
  const result = await autocannon({
    url: job.url,
    connections: job.connections,
    duration,
    method: job.method,
    headers,
    ...(job.body !== undefined && { body: job.body }),
    ...((job.freshIdempotencyKey || job.paths) && { requests: [{ setupRequest: (req) => ({ ...req, ...varied(job) }) }] }),
  });
  const statuses: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statuses[code] = count;
  return {
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    errors: result.errors + result.timeouts,
    statuses,
  };
}

/**
 * `connections` clients, each sending one request after another for `duration`
 * seconds; latency to the end of the response, or to its first body chunk.
 */
async function runNodeClient(job: LoadJob, duration: number): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.connections });
  const until = Date.now() + duration * 1000;
  const times: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const once = () =>
    new Promise<void>((resolve) => {
      const started = process.hrtime.bigint();
      const headers = job.freshIdempotencyKey ? { ...job.headers, 'idempotency-key': freshKey() } : job.headers;
      const req = http.request(job.url, { method: job.method, agent, headers }, (res) => {
        statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
        const took = () => times.push(Number(process.hrtime.bigint() - started) / 1e6);
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


const job = JSON.parse(process.argv[2] ?? '{}') as LoadJob;
const run = job.kind === 'node' ? runNodeClient : runAutocannon;
if (job.warmupSeconds > 0) await run(job, job.warmupSeconds);
const cpuBefore = cpuSeconds(job.serverPid);
const result = await run(job, job.durationSeconds);
const cpuAfter = cpuSeconds(job.serverPid);
if (cpuBefore !== undefined && cpuAfter !== undefined && result.requests > 0) result.cpuUs = Math.round(((cpuAfter - cpuBefore) * 1e6) / result.requests);
console.log(JSON.stringify(result));
