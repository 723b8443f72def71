/**
 * Middlewares as one router layer (http/one-layer.ts) answer as the same
 * middlewares mounted one `app.use` each: the same order, the first error (passed,
 * thrown or rejected) skipping the rest, `underPath` matching the paths
 * `app.use(path, …)` matches. And a server made by http/app-server.ts answers as
 * `http.createServer(app)`, its requests and responses born with the app's
 * prototypes.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { inOneLayer, underPath, type Middleware } from '../../server/http/one-layer.ts';
import { appServer } from '../../server/http/app-server.ts';

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

async function answers(server: http.Server, paths: string[]): Promise<Answer[]> {
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const out: Answer[] = [];
    for (const p of paths) {
      const r = await fetch(base + p);
      const headers = Object.fromEntries([...r.headers].filter(([k]) => k !== 'date'));
      out.push({ status: r.status, body: await r.text(), headers });
    }
    return out;
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

/** An app with `handlers` mounted one way or the other, then a 200 naming what ran, and an error handler naming the error. */
function appWith(mount: (app: express.Express, handlers: Middleware[]) => void, handlers: (ran: string[]) => Middleware[]): express.Express {
  const app = express();
  app.use((req, _res, next) => {
    (req as Request & { ran?: string[] }).ran = [];
    next();
  });
  const ran = (req: Request) => (req as Request & { ran: string[] }).ran;
  const list = handlers([]).map((_h, i) => (req: Request, res: Response, next: NextFunction) => handlers(ran(req))[i]!(req, res, next));
  mount(app, list);
  app.use((req, res) => void res.status(200).send(ran(req).join(',')));
  app.use((error: Error, req: Request, res: Response, _next: NextFunction) => void res.status(500).send(`${ran(req).join(',')} | ${error.message}`));
  return app;
}

const separately = (app: express.Express, handlers: Middleware[]) => handlers.forEach((h) => app.use(h));
const together = (app: express.Express, handlers: Middleware[]) => void app.use(inOneLayer(...handlers));

describe('middlewares as one layer', () => {
  it('when every middleware passes the request on, then they run in order and the request goes on, as with one layer each', async () => {
    const handlers = (ran: string[]): Middleware[] => [
      (_req, _res, next) => (ran.push('a'), next()),
      async (_req, _res, next) => (ran.push('b'), next()),
      (_req, _res, next) => (ran.push('c'), next()),
    ];
    const expected = await answers(http.createServer(appWith(separately, handlers)), ['/x']);
    assert.deepEqual(
      expected.map((a) => a.body),
      ['a,b,c'],
    );
    assert.deepEqual(await answers(http.createServer(appWith(together, handlers)), ['/x']), expected);
  });

  it('when a middleware passes, throws or rejects with an error, then the rest are skipped and the error handler answers, as with one layer each', async () => {
    for (const fail of [
      (_req: Request, _res: Response, next: NextFunction) => next(new Error('passed')),
      () => {
        throw new Error('thrown');
      },
      async () => {
        throw new Error('rejected');
      },
    ]) {
      const handlers = (ran: string[]): Middleware[] => [(_req, _res, next) => (ran.push('a'), next()), fail, (_req, _res, next) => (ran.push('c'), next())];
      const expected = await answers(http.createServer(appWith(separately, handlers)), ['/x']);
      assert.equal(expected[0]!.status, 500);
      assert.match(expected[0]!.body, /^a \| (passed|thrown|rejected)$/);
      assert.deepEqual(await answers(http.createServer(appWith(together, handlers)), ['/x']), expected);
    }
  });

  it('when a middleware answers, then the ones after it do not run, as with one layer each', async () => {
    const handlers = (ran: string[]): Middleware[] => [
      (_req, _res, next) => (ran.push('a'), next()),
      (_req, res) => void res.status(201).send('answered'),
      (_req, _res, next) => (ran.push('c'), next()),
    ];
    const expected = await answers(http.createServer(appWith(separately, handlers)), ['/x']);
    assert.deepEqual(
      expected.map((a) => `${a.status} ${a.body}`),
      ['201 answered'],
    );
    assert.deepEqual(await answers(http.createServer(appWith(together, handlers)), ['/x']), expected);
  });

  it('when paths are tried against underPath, then it runs its handler for exactly the paths app.use(path, …) runs it for', async () => {
    const paths = [
      '/api/things',
      '/API/Things',
      '/api/things/',
      '/api/things/7',
      '/api/things?x=1',
      '/api/thingsx',
      '/api/thing',
      '/api',
      '/',
      '/other/api/things',
    ];
    const handlers = (ran: string[]): Middleware[] => [(_req, _res, next) => (ran.push('hit'), next())];
    const mounted = (app: express.Express, list: Middleware[]) => void app.use('/api/things', list[0]!);
    const guarded = (app: express.Express, list: Middleware[]) => void app.use(underPath('/api/things', list[0]!));
    const expected = await answers(http.createServer(appWith(mounted, handlers)), paths);
    assert.deepEqual(
      expected.map((a) => a.body),
      ['hit', 'hit', 'hit', 'hit', 'hit', '', '', '', '', ''],
    );
    assert.deepEqual(await answers(http.createServer(appWith(guarded, handlers)), paths), expected);
  });
});

describe('a server whose requests are born as the app’s', () => {
  it('when a request arrives, then its request and response already have the app’s prototypes, and the answer is http.createServer(app)’s', async () => {
    const make = () => {
      const app = express();
      app.disable('x-powered-by');
      app.get('/json', (req, res) => void res.status(200).json({ path: req.path, query: req.query, fresh: req.fresh }));
      app.use((_req, res) => void res.status(404).type('text').send('none'));
      return app;
    };
    const paths = ['/json?a=1', '/missing'];
    const expected = await answers(http.createServer(make()), paths);
    const app = make();
    const server = appServer(app);
    const seen: boolean[] = [];
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      seen.push(Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response);
      seen.push(req instanceof http.IncomingMessage && res instanceof http.ServerResponse);
    });
    assert.deepEqual(await answers(server, paths), expected);
    assert.deepEqual(
      expected.map((a) => a.status),
      [200, 404],
    );
    assert.deepEqual(seen, [true, true, true, true]);
  });
});
