/**
 * scripts/build.ts bundles knex (with lodash), obscenity, express and
 * express-openapi-validator into the bundles instead of leaving Node to resolve,
 * read and wrap their ~850 files from node_modules at every start, and leaves
 * native modules and database drivers (sqlite3, pg) in node_modules for the
 * bundled code to require at run time. The bundled packages' legacy `url.parse`
 * stays as quiet as it was in node_modules (no DEP0169 warning on stderr).
 * Checked on a small bundle run in a Node of its own.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { bundledPackages, builtinsByRequire, NODE_BUNDLE, REQUIRE_BANNER } from '../../scripts/build.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside the tree (dist/ is ignored), so that what stays external resolves from node_modules as in dist/app.
fs.mkdirSync(path.join(ROOT, 'dist'), { recursive: true });
const dir = fs.mkdtempSync(path.join(ROOT, 'dist', '.test-bundled-'));

const ENTRY = `
import { createRequire } from 'node:module';
import http from 'node:http';
import express from 'express';
import knex from 'knex';
import { RegExpMatcher, englishDataset, englishRecommendedTransformers } from 'obscenity';
const db = knex({ client: 'sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
const rows = await db.select(db.raw('1 + 1 as two')).limit(1);
await db.destroy();
const matcher = new RegExpMatcher({ ...englishDataset.build(), ...englishRecommendedTransformers });
// A request in absolute form: express's parseurl gives it to url.parse.
const app = express().get('/x', (req, res) => res.json(req.query));
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const query = await new Promise((resolve, reject) => {
  const req = http.request({ host: '127.0.0.1', port: server.address().port, path: 'http://example.test/x?a=1' }, (res) => {
    let body = '';
    res.on('data', (d) => (body += d)).on('end', () => resolve(JSON.parse(body)));
  });
  req.on('error', reject).end();
});
server.close();
const files = Object.keys(createRequire(import.meta.url).cache);
const from = (name) => files.filter((f) => f.split(/[\\\\/]node_modules[\\\\/]/).at(-1).startsWith(name + '/')).length;
console.log(JSON.stringify({ rows, matched: matcher.hasMatch('what the fuck'), query, files: { knex: from('knex'), lodash: from('lodash'), obscenity: from('obscenity'), express: from('express'), sqlite3: from('sqlite3') > 0 } }));
`;

describe('packages bundled by the build', () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when a bundle uses knex on SQLite, obscenity and express, then none of their files is loaded from node_modules, sqlite3 (native) is, and url.parse warns of nothing', async () => {
    fs.writeFileSync(path.join(dir, 'entry.ts'), ENTRY);
    const result = await build({
      entryPoints: [path.join(dir, 'entry.ts')],
      outfile: path.join(dir, 'out.mjs'),
      ...NODE_BUNDLE,
      logLevel: 'silent',
      metafile: true,
      banner: { js: REQUIRE_BANNER },
      plugins: [builtinsByRequire, bundledPackages],
    });
    const inputs = Object.keys(result.metafile.inputs);
    assert.ok(inputs.some((f) => /node_modules\/knex\/lib\/dialects\/sqlite3\//.test(f)) && inputs.some((f) => /node_modules\/lodash\//.test(f)));
    assert.ok(!inputs.some((f) => /node_modules\/(sqlite3|pg)\//.test(f)), 'drivers stay in node_modules');
    const run = spawnSync(process.execPath, [path.join(dir, 'out.mjs')], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.doesNotMatch(run.stderr, /DEP0169|DeprecationWarning/);
    const out = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.deepEqual(out, { rows: [{ two: 2 }], matched: true, query: { a: '1' }, files: { knex: 0, lodash: 0, obscenity: 0, express: 0, sqlite3: true } });
  });
});
