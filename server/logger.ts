/**
 * Structured logs (pino). Secrets never reach a log: authorization headers are redacted.
 * Lines go to stdout asynchronously and never block a request. Access-log lines
 * (one per request, `ACCESS_LINE`) are batched: they leave when 4 KB have gathered
 * or at the latest after `ACCESS_FLUSH_MS`, so a busy server writes one syscall per
 * few dozen requests instead of one per request (measured: a write per line cost
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

export function createLogger(
  level: string,
  destination: pino.DestinationStream = pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: ACCESS_FLUSH_MS }),
): Logger {
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
          if (args[args.length - 1] !== ACCESS_LINE) sendNow(this);
        },
      },
    },
    destination,
  );
}

/**
 * Starts writing what the destination holds. Not pino's `logger.flush()`: that
 * hands sonic-boom a callback, and for each one sonic-boom adds a 'drain' and an
 * 'error' listener and runs an fsync when the write in flight ends, so a burst of
 * lines (a shutdown, a run of errors) stacked listeners past Node's warning at
 * ten and an fsync per line. sonic-boom's `flush()` without a callback writes
 * the same bytes at the same moment (now, or right after the write in flight).
 */
function sendNow(logger: Logger): void {
  const stream = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as {
    flush?: (cb?: () => void) => void;
    destroyed?: boolean;
    minLength?: number;
  };
  if (typeof stream.flush !== 'function') return;
  if (stream.minLength === undefined)
    stream.flush(() => undefined); // not sonic-boom: pino's own way
  else if (!stream.destroyed) stream.flush();
}

/** What an access line says of a request (http/access-log.ts). */
export interface AccessFields {
  requestId: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  key?: string | undefined;
  /** false for a response the client abandoned before its end. */
  complete?: false;
}

/**
 * Writes access lines as `logger.info({ requestId, method, … }, ACCESS_LINE)`
 * would, byte for byte (a unit test holds it to pino's own line), without pino's
 * general path: no per-field serializer and redaction lookups for fields that are
 * plain strings and numbers and never secret, one string built and handed to the
 * logger's destination. Honours the logger's level at the time of each line.
 */
export function accessWriter(logger: Logger): (fields: AccessFields) => void {
  const internals = logger as unknown as Record<symbol, unknown>;
  const { chindingsSym, streamSym, timeSym } = pino.symbols;
  const head = `{"level":${logger.levels.values.info}`;
  const tail = `,"msg":${JSON.stringify(ACCESS_LINE)}}\n`;
  return (f) => {
    if (!logger.isLevelEnabled('info')) return;
    const time = (internals[timeSym] as () => string)();
    let line = `${head}${time}${internals[chindingsSym] as string},"requestId":${JSON.stringify(f.requestId)},"method":${JSON.stringify(f.method)},"path":${JSON.stringify(f.path)},"status":${f.status},"ms":${Number.isFinite(f.ms) ? f.ms : null}`;
    if (f.key !== undefined) line += `,"key":${JSON.stringify(f.key)}`;
    if (f.complete === false) line += ',"complete":false';
    (internals[streamSym] as { write(s: string): void }).write(line + tail);
  };
}
