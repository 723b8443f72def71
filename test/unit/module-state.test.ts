/**
 * State lives in what the composition root builds, not in modules: a counter,
 * a registry or a store found by a key (a map keyed by DATA_DIR) at module
 * level is invisible in `AppDeps` and in signatures, and two apps in one
 * process share it whether they should or not. So a module-level `let`, or a
 * module-level Map, Set or object made empty to be filled at run time, is
 * refused outside the list below, each entry with the reason it is the
 * process's and not an app's. Constant tables (a Set or Map made with its
 * contents) and WeakMaps keyed by the instance they extend are not state of
 * this kind and are not listed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SERVER, sources } from '../helpers/imports.ts';

/** A module-level `let`, or a module-level const made with `new X()` and no contents (WeakMap and WeakSet aside). */
const STATE = /^(?:export )?(?:let ([A-Za-z_$][\w$]*)|const ([A-Za-z_$][\w$]*)(?:: [^=]+)? = new (?!Weak)[\w$.]+(?:<[^(]*>)?\(\))/;

const LAZY_LOAD = 'a module loaded once on first use (the same code for every app)';
const MEMO = 'a memo of a pure function of its key (the same answer for every app)';

/** "file name" → why it is the process's. */
const ALLOWED: Record<string, string> = {
  // Browser code: one page, one state.
  'console-page/main.ts csrfToken': 'the page is the instance (runs in the browser)',
  'console-page/main.ts edits': 'the page is the instance (runs in the browser)',
  'console-page/build.ts built': 'the bundled page script is the same for every app; built once per process',
  // Lazy loads and memos: no state an app could own.
  'tokens.ts bpe': LAZY_LOAD,
  'yaml-file.ts yaml': LAZY_LOAD,
  'media/sharp.ts loaded': LAZY_LOAD,
  'providers/audio/speech.ts compiled': LAZY_LOAD,
  'storage/engine/pg-deferred.ts pgEscape': LAZY_LOAD,
  'providers/moderation/dictionary.ts dictionary': LAZY_LOAD,
  'providers/moderation/classifier.ts shipped': LAZY_LOAD,
  'providers/moderation/frame.ts shipped': LAZY_LOAD,
  'providers/moderation/normalize.ts stems': MEMO,
  'providers/moderation/normalize.ts folded': MEMO,
  'providers/moderation/normalize.ts foldedUnits': MEMO,
  'providers/moderation/normalize.ts lastFold': MEMO,
  'providers/moderation/gloss.ts TABLES_OF': MEMO,
  'providers/moderation/language.ts LANGUAGES_OF': MEMO,
  'providers/moderation/names.ts EMPTY': 'an empty set shared read-only',
  'domain/policy/access.ts parsed': MEMO,
  'storage/engine/compiled.ts plans': 'compiled SQL by statement name and dialect: a memo (a name fixes the SQL)',
  'storage/engine/query.ts shapes': 'the test-runner check that a statement name gives one SQL text, across every app',
  // Identifiers: unique in the process, whatever app makes them.
  'domain/ids.ts pool': 'random bytes drawn in blocks for ids: one pool per process',
  'domain/ids.ts offset': 'random bytes drawn in blocks for ids: one pool per process',
  'domain/ids.ts lastOrder': 'ids ordered within the process, whatever app makes them',
  'domain/principal-cache.ts generation': 'bumped at every key change this process sees; any app may read a key another revoked',
  // Counts that are the process's by meaning.
  'http/metrics.ts processRegistry': "the process's own metrics (memory, CPU, event loop): one per process, merged into every app's",
  'worker/counts.ts processJobCounts': 'gemforge_worker_jobs_total is "jobs of this worker process"; a worker given its own counts adds to those instead',
  'storage/outages.ts storeErrorCounts':
    'counted beneath every statement by the query engine and by the object-store client, where no app is at hand; /metrics reads it through the counts server.ts hands it',
  // The upstream's own limit, whatever app polls it.
  'providers/remote/read-limit.ts processReadLimits':
    'the upstream limits its account and key, not an app: two apps in one process polling one key share its budget, or together they would spend it twice',
};

function moduleState(): string[] {
  return sources('').flatMap((file) =>
    fs
      .readFileSync(path.join(SERVER, file), 'utf8')
      .split('\n')
      .map((line) => STATE.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => `${file.split(path.sep).join('/')} ${m[1] ?? m[2]}`),
  );
}

describe('module-level state', () => {
  it('when server/ is read, then no module holds a mutable registry, counter or cache outside the list with its reason (pass it as a dependency instead)', () => {
    const found = moduleState();
    assert.deepEqual(
      found.filter((entry) => !(entry in ALLOWED)),
      [],
      'module-level state: build it in the composition root (server.ts, cli/) and pass it (AppDeps, a worker option), or list it here with why it is the process’s',
    );
  });

  it('when the list is read, then every entry still names state in server/ (a stale entry would let a new one of that name in)', () => {
    const found = new Set(moduleState());
    assert.deepEqual(
      Object.keys(ALLOWED).filter((entry) => !found.has(entry)),
      [],
    );
  });

  it('when the rule reads a line, then it tells state from constant tables and instance-keyed maps', () => {
    const hit = (line: string) => STATE.exec(line)?.slice(1).find(Boolean);
    assert.equal(hit('const remoteStores = new Map<string, RemoteBlobStore>();'), 'remoteStores');
    assert.equal(hit('export const counts = new Map<string, number>();'), 'counts');
    assert.equal(hit('let store: SharedBreakerStore | undefined;'), 'store');
    assert.equal(hit('const registry = new client.Registry();'), 'registry');
    assert.equal(hit("const TERMINAL = new Set(['succeeded', 'failed']);"), undefined);
    assert.equal(hit('const kits = new WeakMap<Knex, Kit>();'), undefined);
    assert.equal(hit('  let local = 0;'), undefined);
  });
});
