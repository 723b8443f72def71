/**
 * One way to query: statements live in the table modules of server/storage and
 * run through the query engine, server/storage/engine/, by its one entry point
 * engine/query.ts. These tripwires read the sources and fail naming the file and
 * line that goes around it: a table module reaching into the engine past
 * query.ts or awaiting a knex builder of its own, the engine reaching up into a
 * table module, or code outside server/storage importing knex or building
 * queries.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SERVER = path.join(ROOT, 'server');

/** The query engine: what stands behind query() and the connections it runs on. */
const ENGINE = path.join('server', 'storage', 'engine') + path.sep;
/** The wiring that opens the database (engine and connections): the one module beside the engine that may use its insides. */
const WIRING = path.join('server', 'storage', 'db.ts');
/** An import of an engine file other than its entry point, query.ts. */
const BEHIND_QUERY = /from '\.\/engine\/(?!query\.ts')[^']+'/;
/** An import, from inside the engine, of a storage module outside it (outages.ts, the store-failure vocabulary it shares with the blob store, is no table module). */
const OUT_OF_ENGINE = /from '\.\.\/(?!outages\.ts')[^']+'/;
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
  const engine = storage.filter((f) => f.startsWith(ENGINE));
  const modules = storage.filter((f) => !f.startsWith(ENGINE) && f !== WIRING);

  it('when a storage module is not the engine, then it imports nothing of the engine but query.ts', () => {
    assert.ok(
      modules.some((f) => f.endsWith('tasks.ts')),
      'the scan finds the storage modules',
    );
    assert.deepEqual(
      modules.flatMap((f) => offending(f, BEHIND_QUERY)),
      [],
      'go through server/storage/engine/query.ts',
    );
  });

  it('when the engine is read, then it imports no storage module outside its folder (the table modules stand on it, not under it)', () => {
    assert.ok(engine.some((f) => f.endsWith('compiled.ts')) && engine.some((f) => f.endsWith('query.ts')), 'the scan finds the engine');
    assert.deepEqual(
      engine.flatMap((f) => offending(f, OUT_OF_ENGINE)),
      [],
    );
  });

  it('when a storage module runs a statement, then it runs it through query(), never by awaiting a knex builder', () => {
    assert.deepEqual(
      modules.flatMap((f) => offending(f, AWAITED_BUILDER)),
      [],
      'declare a statement (statement.rows/first/write/…) and run it with query()',
    );
  });

  it('when code outside server/storage talks to the database, then it calls a storage function: no knex import, no query built there', () => {
    const outside = sources(SERVER).filter((f) => !f.startsWith(path.join('server', 'storage') + path.sep));
    assert.ok(
      outside.some((f) => f.endsWith('metrics.ts')),
      'the scan finds the server outside storage',
    );
    assert.deepEqual(
      outside.flatMap((f) => offending(f, KNEX_USE)),
      [],
      'move the statement into a module of server/storage',
    );
  });

  it('when the patterns meet what they must catch, then they catch it (the tripwire itself works)', () => {
    assert.match("import { execute } from './engine/compiled.ts';", BEHIND_QUERY);
    assert.doesNotMatch("import { query, statement } from './engine/query.ts';", BEHIND_QUERY);
    assert.match("import { isSqlite } from '../db.ts';", OUT_OF_ENGINE);
    assert.doesNotMatch("import { countStoreError } from '../outages.ts';", OUT_OF_ENGINE);
    assert.match("  const row = await db('tasks').where({ id }).first();", AWAITED_BUILDER);
    assert.match("  await trx.raw('select 1');", AWAITED_BUILDER);
    assert.doesNotMatch('  const row = await query(db, taskById, [id]);', AWAITED_BUILDER);
    assert.match("import knex, { type Knex } from 'knex';", KNEX_USE);
    assert.match("  for (const row of await db('tasks').select('status'))", KNEX_USE);
    assert.match("  await db.raw('select 1');", KNEX_USE);
    assert.doesNotMatch('  const { data } = await sharp(file).raw().toBuffer();', KNEX_USE);
  });
});
