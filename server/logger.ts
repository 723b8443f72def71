/**
 * Structured logs (pino). Secrets never reach a log: authorization headers are redacted.
 * Lines go to stdout asynchronously and never block a request. Access-log lines
 * (one per request, `ACCESS_LINE`) are batched: they leave when 4 KB have gathered
 * or at the latest after `ACCESS_FLUSH_MS`, so a busy server writes one syscall per
 * few dozen requests instead of one per request (issue 13: a write per line cost
 * about a tenth of a task read). Every other line (start, stop, errors, jobs)
 * leaves at once, taking any batched lines before it along. pino flushes what is
 * left when the process exits, also on process.exit(); a process killed with
 * SIGKILL can lose at most the last 4 KB of access lines.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** The message of access-log lines (http/access-log.ts), the only ones batched. */
export const ACCESS_LINE = 'request';
/** How long an access line may wait for others to share its write. */
export const ACCESS_FLUSH_MS = 200;

export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { service: 'gemforge' },
      redact: {
        paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'secret', '*.secret'],
        censor: '[redacted]',
      },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args);
          if (args[args.length - 1] !== ACCESS_LINE) this.flush();
        },
      },
    },
    pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: ACCESS_FLUSH_MS }),
  );
}
