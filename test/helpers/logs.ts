/** A logger whose lines are kept in memory, for tests that read what the server logged. */
import { Writable } from 'node:stream';
import { createLogger } from '../../server/logger.ts';

export function capturedLogger(level: string) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger(level, sink), lines };
}
