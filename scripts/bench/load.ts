/**
 * The load generator, run as its own process (pinned to another core than the
 * server by bench-http.ts): one JSON job in argv[2], one JSON result on stdout.
 * `autocannon` jobs drive a fixed request (optionally with a fresh
 * Idempotency-Key each, or over several paths in turn); `node` jobs use
 * node:http's own client, for what autocannon cannot measure: HEAD (its parser
 * waits for a body the headers announce) and the time to the first chunk of a
 * stream (`firstChunk`).
 */
import autocannon from 'autocannon';
import type { LoadJob, LoadResult } from './types.ts';
import { cpuSeconds } from './cpu.ts';
import { runNodeClient, varied } from './clients.ts';

async function runAutocannon(job: LoadJob, duration: number): Promise<LoadResult> {
  const headers = { ...job.headers };
  const result = await autocannon({
    url: job.url,
    connections: job.connections,
    duration,
    method: job.method,
    headers,
    ...(job.body !== undefined && { body: job.body }),
    ...((job.freshIdempotencyKey || job.paths || job.bodies) && { requests: [{ setupRequest: (req) => ({ ...req, ...varied(job) }) }] }),
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

const job = JSON.parse(process.argv[2] ?? '{}') as LoadJob;
const run = job.kind === 'node' ? runNodeClient : runAutocannon;
if (job.warmupSeconds > 0) await run(job, job.warmupSeconds);
const cpuBefore = cpuSeconds(job.serverPid);
const result = await run(job, job.durationSeconds);
const cpuAfter = cpuSeconds(job.serverPid);
if (cpuBefore !== undefined && cpuAfter !== undefined && result.requests > 0) result.cpuUs = Math.round(((cpuAfter - cpuBefore) * 1e6) / result.requests);
console.log(JSON.stringify(result));
