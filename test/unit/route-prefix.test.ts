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
import { byPrefix, literalHead } from '../../server/http/route-prefix.ts';

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
});
