/**
 * scripts/build.ts bundles knex (with lodash) and obscenity into the bundles
 * instead of leaving Node to resolve, read and wrap their ~360 files from
 * node_modules at every start, and leaves native modules and database drivers
 * (sqlite3, pg) in node_modules for the bundled code to require at run time.
 * Checked on a small bundle run in a Node of its own.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { bundledPackages, builtinsByRequire, REQUIRE_BANNER } from '../../scripts/build.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside the tree (dist/ is ignored), so that what stays external resolves from node_modules as in dist/app.
fs.mkdirSync(path.join(ROOT, 'dist'), { recursive: true });
const dir = fs.mkdtempSync(path.join(ROOT, 'dist', '.test-bundled-'));

const ENTRY = `
import { createRequire } from 'node:module';
import knex from 'knex';
import { RegExpMatcher, englishDataset, englishRecommendedTransformers } from 'obscenity';
const db = knex({ client: 'sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
const rows = await db.select(db.raw('1 + 1 as two')).limit(1);
await db.destroy();
const matcher = new RegExpMatcher({ ...englishDataset.build(), ...englishRecommendedTransformers });
const files = Object.keys(createRequire(import.meta.url).cache);
const from = (name) => files.filter((f) => f.split(/[\\\\/]node_modules[\\\\/]/).at(-1).startsWith(name + '/')).length;
console.log(JSON.stringify({ rows, matched: matcher.hasMatch('what the fuck'), files: { knex: from('knex'), lodash: from('lodash'), obscenity: from('obscenity'), sqlite3: from('sqlite3') > 0 } }));
`;

describe('packages bundled by the build', () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when a bundle uses knex on SQLite and obscenity, then none of their files is loaded from node_modules, and sqlite3 (native) is', async () => {
    fs.writeFileSync(path.join(dir, 'entry.ts'), ENTRY);
    const result = await build({
      entryPoints: [path.join(dir, 'entry.ts')],
      outfile: path.join(dir, 'out.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      logLevel: 'silent',
      metafile: true,
      banner: { js: REQUIRE_BANNER },
      plugins: [builtinsByRequire, bundledPackages],
    });
    const inputs = Object.keys(result.metafile.inputs);
    assert.ok(inputs.some((f) => /node_modules\/knex\/lib\/dialects\/sqlite3\//.test(f)) && inputs.some((f) => /node_modules\/lodash\//.test(f)));
    assert.ok(!inputs.some((f) => /node_modules\/(sqlite3|pg)\//.test(f)), 'drivers stay in node_modules');
    const out = JSON.parse(execFileSync(process.execPath, [path.join(dir, 'out.mjs')], { encoding: 'utf8' })) as Record<string, unknown>;
    assert.deepEqual(out, { rows: [{ two: 2 }], matched: true, files: { knex: 0, lodash: 0, obscenity: 0, sqlite3: true } });
  });
});
