/**
 * Structured logs (pino). Secrets never reach a log: authorization headers are redacted.
 * Lines go to stdout asynchronously: lines logged while a write is in flight
 * leave together in the next one (one syscall for many access-log lines under
 * load, none blocking a request); pino flushes what is left when the process
 * exits, also on process.exit().
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { service: 'gemforge' },
      redact: {
        paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret'],
        censor: '[redacted]',
      },
    },
    pino.destination({ dest: 1, sync: false }),
  );
}
