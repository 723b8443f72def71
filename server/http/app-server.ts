/**
 * The HTTP server of an Express app, whose requests and responses are made with
 * the app's own prototypes (`app.request`, `app.response`) from the start.
 * Express's `app.handle` moves every request and response onto them with
 * `Object.setPrototypeOf` after Node made them as plain `IncomingMessage` and
 * `ServerResponse`: two changes of hidden class per request, and code that had
 * seen the object before sees a new shape. Node makes them with the classes a
 * server is given (`IncomingMessage`, `ServerResponse` options), so here they
 * are born with the prototype Express wants, and its `setPrototypeOf` finds the
 * prototype already set (a no-op). Everything else is Node's and Express's own:
 * the constructors are Node's, the prototypes Express's.
 */
import http from 'node:http';
import type { Express } from 'express';

type Constructor<T> = new (...args: never[]) => T;

/** A constructor running `base` on `this`, whose instances have `prototype`. */
function bornWith<T>(base: Constructor<T>, prototype: object): Constructor<T> {
  const construct = base as unknown as (this: T, ...args: unknown[]) => void;
  function Made(this: T, ...args: unknown[]): void {
    construct.apply(this, args);
  }
  Made.prototype = prototype;
  return Made as unknown as Constructor<T>;
}

/** `http.createServer(app)`, with requests and responses made as the app's from the start. */
export function appServer(app: Express): http.Server {
  return http.createServer(
    {
      IncomingMessage: bornWith(http.IncomingMessage, app.request) as typeof http.IncomingMessage,
      ServerResponse: bornWith(http.ServerResponse, app.response) as unknown as typeof http.ServerResponse,
    },
    app,
  );
}
