/**
 * One structured log line per request, bound to its request id. Never logs
 * headers (keys). The line is written by `accessWriter` exactly as a logger bound
 * to the request id would write it; that child logger itself (`req.log`, for the
 * handlers that log) is made only when one asks for it, by a getter put once on
 * the app's request prototype (`app.request`, which Express gives each request;
 * defining one on each request would cost more than the child it saves).
 * Measured: a pino child and pino's general path per request were about a tenth
 * of what a task read cost.
 */
import type { NextFunction, Request, Response } from 'express';
import { accessWriter, type Logger } from '../logger.ts';

const CHILD = Symbol('request logger');
const STARTED = Symbol('request started');
type WithChild = Request & { [CHILD]?: Logger };

/** Gives the requests of one app (`proto` is its request prototype) a `log` made on first use. */
function lazyRequestLogger(proto: object, logger: Logger): void {
  Object.defineProperty(proto, 'log', {
    configurable: true,
    get(this: WithChild) {
      return (this[CHILD] ??= logger.child({ requestId: this.id }));
    },
    set(this: WithChild, value: Logger) {
      this[CHILD] = value;
    },
  });
}

/** The access-log middleware of an app whose requests have `requestPrototype` (`app.request`). */
export function accessLog(logger: Logger, requestPrototype: object, metrics?: { observe(req: Request, status: number, seconds: number): void }) {
  const write = accessWriter(logger);
  lazyRequestLogger(requestPrototype, logger);
  // One 'close' listener for every response (not a closure per request); it finds the
  // request through `res.req` and the start on the response. 'close' comes for every
  // response, also one the client abandoned (a stream cut mid-way never emits
  // 'finish'); `complete` says which it was.
  function logged(this: Response & { [STARTED]?: bigint }): void {
    const req = this.req;
    const ms = Number(process.hrtime.bigint() - this[STARTED]!) / 1e6;
    metrics?.observe(req, this.statusCode, ms / 1000);
    write({
      requestId: req.id,
      method: req.method,
      path: req.path,
      status: this.statusCode,
      ms: Math.round(ms * 10) / 10,
      key: req.principal?.key.id,
      ...(this.writableFinished ? {} : { complete: false }),
    });
  }
  return (_req: Request, res: Response & { [STARTED]?: bigint }, next: NextFunction): void => {
    res[STARTED] = process.hrtime.bigint();
    res.on('close', logged);
    next();
  };
}
