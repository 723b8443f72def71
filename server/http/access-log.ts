/** One structured log line per request, bound to its request id. Never logs headers (keys). */
import type { NextFunction, Request, Response } from 'express';
import { ACCESS_LINE, type Logger } from '../logger.ts';

export function accessLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    req.log = logger.child({ requestId: req.id });
    // 'close' comes for every response, also one the client abandoned (a stream
    // cut mid-way never emits 'finish'); `complete` says which it was.
    res.on('close', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      req.log?.info(
        {
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
          key: req.principal?.key.id,
          ...(res.writableFinished ? {} : { complete: false }),
        },
        ACCESS_LINE,
      );
    });
    next();
  };
}
