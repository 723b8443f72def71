/** `npm start`: serve on HOST:PORT (default 127.0.0.1:8080) with the embedded defaults. */
import { loadConfig } from './config.ts';
import { startServer } from './server.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const starting = startServer(config);
  // The handlers go in before the start ends: the listener answers /healthz
  // before startServer returns (its self-check and the worker come after), and
  // a SIGTERM in that window took Node's default action, killing the server
  // without the drain or its log (test/start-signal.test.ts failed so, now and
  // then, on a loaded machine). A signal during the start now waits for it.
  const stop = async (signal: string) => {
    const running = await starting.catch(() => undefined); // a failed start is reported by main's catch
    if (!running) return;
    running.logger.info({ signal, graceSeconds: config.shutdownGraceSeconds }, 'shutting down: finishing in-flight requests');
    await running.close({ graceMs: config.shutdownGraceSeconds * 1000, readinessDelayMs: config.shutdownReadinessDelaySeconds * 1000 });
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  await starting;
}

main().catch((error: unknown) => {
  console.error(`gemforge: failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
