/** `npm start`: serve on HOST:PORT (default 127.0.0.1:8080) with the embedded defaults. */
import { loadConfig } from './config.ts';
import { startServer } from './server.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const running = await startServer(config);
  const stop = async (signal: string) => {
    running.logger.info({ signal, graceSeconds: config.shutdownGraceSeconds }, 'shutting down: finishing in-flight requests');
    await running.close({ graceMs: config.shutdownGraceSeconds * 1000, readinessDelayMs: config.shutdownReadinessDelaySeconds * 1000 });
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(`gemforge: failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
