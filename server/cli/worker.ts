/**
 * `gemforge worker`: the media worker as its own process, on the same
 * DATA_DIR / DATABASE_URL as the server (run the server with WORKER_ENABLED=false).
 */
import { loadConfig } from '../config.ts';
import { createLogger } from '../logger.ts';
import { openDb } from '../storage/db.ts';
import { systemClock } from '../domain/clock.ts';
import { configureBlobStore, guardDataDir, startMediaWorker } from '../server.ts';

export async function runWorker(): Promise<number> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  guardDataDir(config.dataDir, logger);
  await configureBlobStore(config);
  const db = await openDb(config);
  const worker = startMediaWorker(config, db, logger, systemClock);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  logger.info('worker stopping');
  await worker.stop();
  await db.destroy();
  return 0;
}
