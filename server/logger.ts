/** Structured logs (pino). Secrets never reach a log: authorization headers are redacted. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'gemforge' },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret'],
      censor: '[redacted]',
    },
  });
}
