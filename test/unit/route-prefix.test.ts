/**
 * Routers entered by prefix (http/route-prefix.ts): every path a router's routes
 * match still reaches them (case-insensitively, with a trailing slash, with
 * parameters), other paths pass by, and a router with anything but plain routes
 * is always entered.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import express, { Router } from 'express';
import { byPrefix, byPrefixes, literalHead } from '../../server/http/route-prefix.ts';

async function answers(app: express.Express, paths: string[]): Promise<string[]> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return await Promise.all(paths.map(async (p) => `${(await fetch(base + p)).status} ${await (await fetch(base + p)).text()}`));
  } finally {
    server.close();
  }
}

describe('routers entered by prefix', () => {
  it('when a route path has parameters or wildcards, then its literal head is the part before the first one, lower-cased', () => {
    assert.equal(literalHead('/api/generate/tasks/:id'), '/api/generate/tasks/');
    assert.equal(literalHead('/Docs'), '/docs');
    assert.equal(literalHead('/files/*rest'), '/files/');
    assert.equal(literalHead('/a{/:b}'), '/a');
  });

  it('when requests reach a guarded router, then every path its routes match is answered as without the guard, and others pass by', async () => {
    const entered: string[] = [];
    const make = () => {
      const router = Router();
      router.get('/api/things/:id', (req, res) => void res.send(`thing ${req.params.id}`));
      router.get('/docs', (_req, res) => void res.send('docs'));
      return router;
    };
    const paths = ['/api/things/7', '/API/Things/8', '/api/things/9/', '/docs', '/DOCS/', '/api/other', '/doc', '/x'];
    const plain = express()
      .use(make())
      .use((_req, res) => void res.status(404).send('none'));
    type Handle = (req: express.Request, res: express.Response, next: express.NextFunction) => void;
    const watched = make() as Router & { handle: Handle };
    const handle = watched.handle.bind(watched);
    watched.handle = (req, res, next) => {
      entered.push(req.path); // Express enters a router through its handle()
      handle(req, res, next);
    };
    const guarded = express()
      .use(byPrefix(watched))
      .use((_req, res) => void res.status(404).send('none'));
    const expected = await answers(plain, paths);
    assert.deepEqual(await answers(guarded, paths), expected);
    assert.deepEqual(expected.slice(0, 5), ['200 thing 7', '200 thing 8', '200 thing 9', '200 docs', '200 docs']);
    assert.deepEqual([...new Set(entered)].sort(), ['/API/Things/8', '/DOCS/', '/api/things/7', '/api/things/9/', '/docs'].sort());
  });

  it('when a router has a middleware of its own or a RegExp route, then it is always entered (returned as it is)', () => {
    const withUse = Router();
    withUse.use((_req, _res, next) => next());
    withUse.get('/a', (_req, res) => void res.end());
    assert.equal(byPrefix(withUse), withUse);
    const withRegExp = Router();
    withRegExp.get(/^\/b/, (_req, res) => void res.end());
    assert.equal(byPrefix(withRegExp), withRegExp);
    const guarded = Router();
    guarded.get('/c', (_req, res) => void res.end());
    assert.notEqual(byPrefix(guarded), guarded);
  });

  it('when several routers share one guard, then each path is answered as with each router mounted on its own, in order, errors skipping the rest', async () => {
    const errorHandler: express.ErrorRequestHandler = (err: Error, _req, res, _next) => void res.status(500).send(`error ${err.message}`);
    const first = () => {
      const router = Router();
      router.get('/a/:id', (req, res, next) => (req.params.id === 'pass' ? next() : void res.send(`first ${req.params.id}`)));
      router.get('/fail', () => {
        throw new Error('first failed');
      });
      return router;
    };
    const second = () => {
      const router = Router();
      router.get('/a/:id', (req, res) => void res.send(`second ${req.params.id}`));
      router.get('/fail', (_req, res) => void res.send('second reached'));
      router.get('/b', (_req, res) => void res.send('b'));
      return router;
    };
    const always = () => {
      const router = Router();
      router.use((req, res, next) => (req.path === '/c' ? void res.send('always') : next()));
      return router;
    };
    const tail = (app: express.Express) => app.use((_req, res) => void res.status(404).send('none')).use(errorHandler);
    const paths = ['/a/1', '/A/pass', '/fail', '/b', '/B/', '/c', '/x'];
    const separate = tail(express().use(byPrefix(first())).use(byPrefix(second())).use(byPrefix(always())));
    const shared = tail(express().use(byPrefixes(first(), second(), always())));
    const expected = await answers(separate, paths);
    assert.deepEqual(expected, ['200 first 1', '200 second pass', '500 error first failed', '200 b', '200 b', '200 always', '404 none']);
    assert.deepEqual(await answers(shared, paths), expected);
  });
});
