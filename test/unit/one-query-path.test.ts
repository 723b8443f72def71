/**
 * One way to query: statements live in server/storage and run
 * through server/storage/query.ts. These tripwires read the sources and fail
 * naming the file and line that goes around it: a storage module reaching the
 * machinery behind query() or awaiting a knex builder of its own, or code
 * outside server/storage importing knex or building queries.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SERVER = path.join(ROOT, 'server');

/** What stands behind query(), and the wiring that opens connections: the only files that may use it. */
const MACHINERY = new Set(['query.ts', 'compiled.ts', 'reads.ts', 'statement-cache.ts', 'pg-deferred.ts', 'knex-adapter.ts', 'db.ts', 'checkpoint.ts', 'sqlite-connection.ts']);
const BEHIND_QUERY = /from '\.\/(compiled|reads|statement-cache|pg-deferred|knex-adapter)\.ts'/;
/** A knex builder or raw statement awaited as it is (`await db('tasks')…`, `await trx.raw(…)`). */
const AWAITED_BUILDER = /await\s+(?:db|trx|tx|conn|c|knex)\s*(?:<[^>]*>)?\(|await\s+\w+\.raw\(/;
/** A knex import, a query started on a table (`db('tasks')`), or raw SQL (`db.raw('…')`). */
const KNEX_USE = /from 'knex'|import\('knex'\)|\b(?:db|trx|tx|conn|knex)\s*(?:<[^>]*>)?\(\s*['"`]|\.raw\(\s*['"`]/;

/** Every .ts file under `dir`, as paths relative to the repository. */
function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.relative(ROOT, path.join(dir, f)));
}

/** `file:line: text` for each line of `file` matching `pattern`. */
function offending(file: string, pattern: RegExp): string[] {
  return fs
    .readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .flatMap((line, i) => (pattern.test(line) && !/^\s*(\/\/|\*)/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : []));
}

describe('one way to query', () => {
  const storage = sources(path.join(SERVER, 'storage')).filter((f) => !f.includes('/migrations/'));
  const modules = storage.filter((f) => !MACHINERY.has(path.basename(f)));

  it('when a storage module is not the machinery, then it imports nothing that stands behind query()', () => {
    assert.ok(modules.some((f) => f.endsWith('tasks.ts')), 'the scan finds the storage modules');
    assert.deepEqual(modules.flatMap((f) => offending(f, BEHIND_QUERY)), [], 'go through server/storage/query.ts');
  });

  it('when a storage module runs a statement, then it runs it through query(), never by awaiting a knex builder', () => {
    assert.deepEqual(modules.flatMap((f) => offending(f, AWAITED_BUILDER)), [], 'declare a statement (statement.rows/first/write/…) and run it with query()');
  });

  it('when code outside server/storage talks to the database, then it calls a storage function: no knex import, no query built there', () => {
    const outside = sources(SERVER).filter((f) => !f.startsWith(path.join('server', 'storage') + path.sep));
    assert.ok(outside.some((f) => f.endsWith('metrics.ts')), 'the scan finds the server outside storage');
    assert.deepEqual(outside.flatMap((f) => offending(f, KNEX_USE)), [], 'move the statement into a module of server/storage');
  });

  it('when the patterns meet what they must catch, then they catch it (the tripwire itself works)', () => {
    assert.match("import { execute } from './compiled.ts';", BEHIND_QUERY);
    assert.match("  const row = await db('tasks').where({ id }).first();", AWAITED_BUILDER);
    assert.match("  await trx.raw('select 1');", AWAITED_BUILDER);
    assert.doesNotMatch("  const row = await query(db, taskById, [id]);", AWAITED_BUILDER);
    assert.match("import knex, { type Knex } from 'knex';", KNEX_USE);
    assert.match("  for (const row of await db('tasks').select('status'))", KNEX_USE);
    assert.match("  await db.raw('select 1');", KNEX_USE);
    assert.doesNotMatch('  const { data } = await sharp(file).raw().toBuffer();', KNEX_USE);
  });
});
