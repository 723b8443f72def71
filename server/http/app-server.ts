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

type Constructor<T> = new (first: never, second?: never) => T;

/**
 * A constructor making `base`'s objects with `prototype`. `Reflect.construct` with a
 * new target keeps `base`'s own object layout (its properties in the object, as V8
 * learned them); calling `base` on a `this` made by a plain function would not.
 */
function bornWith<T>(base: Constructor<T>, prototype: object): Constructor<T> {
  function Target(): void {}
  Target.prototype = prototype;
  function Made(first: never, second?: never): T {
    return Reflect.construct(base, [first, second], Target) as T;
  }
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
