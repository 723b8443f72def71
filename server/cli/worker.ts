/**
 * `gemforge worker`: the media worker as its own process, on the same
 * DATA_DIR / DATABASE_URL as the server (run the server with WORKER_ENABLED=false).
 * With WORKER_METRICS_PORT it serves /metrics (its jobs, store errors, the
 * process) and /healthz on a listener of its own. A start that fails (the
 * database or the bucket unreachable, bad settings) prints one line and exits 1,
 * like the server's.
 */
import type http from 'node:http';
import { loadConfig } from '../config.ts';
import { createLogger } from '../logger.ts';
import { openDb } from '../storage/db.ts';
import { systemClock } from '../domain/clock.ts';
import { processJobCounts } from '../worker/counts.ts';
import { Deployments } from '../providers/routing/deployments.ts';
import { configureBlobStore, guardDataDir, listenMetrics, shareBreakerState, startMediaWorker } from '../server.ts';

export async function runWorker(): Promise<number> {
  let started: Awaited<ReturnType<typeof start>>;
  try {
    started = await start();
  } catch (error) {
    console.error(`gemforge: failed to start: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  const { logger, db, worker, metricsServer, stopSharing } = started;
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  logger.info('worker stopping');
  await worker.stop();
  stopSharing();
  if (metricsServer) await new Promise((resolve) => metricsServer.close(resolve));
  await db.destroy();
  return 0;
}

async function start() {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  guardDataDir(config.dataDir, logger);
  const blobs = await configureBlobStore(config);
  // The job counts the worker adds to and its /metrics reads: the process's (one worker per process here).
  const jobCounts = processJobCounts;
  // The worker's routed deployments: its providers register theirs, the breaker sharing and its /metrics read them.
  const deployments = new Deployments();
  const db = await openDb({ ...config, log: logger });
  let metricsServer: http.Server | undefined;
  try {
    if (config.workerMetricsPort !== undefined) {
      const { createWorkerMetrics } = await import('../http/metrics.ts');
      metricsServer = await listenMetrics(createWorkerMetrics(jobCounts, deployments), config.metricsHost, config.workerMetricsPort);
      const { port } = metricsServer.address() as { port: number };
      logger.info({ url: `http://${config.metricsHost}:${port}` }, 'worker metrics listening (/metrics, /healthz)');
    }
  } catch (error) {
    await db.destroy();
    throw error;
  }
  const worker = startMediaWorker(config, db, logger, systemClock, undefined, { blobs, jobCounts, deployments });
  // Its breakers (the media upstreams are called here) reach the API's admission through the database.
  const stopSharing = shareBreakerState(db, logger, deployments);
  return { logger, db, worker, metricsServer, stopSharing };
}
