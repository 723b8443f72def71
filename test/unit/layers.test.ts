/**
 * The layering rule: routes → domain → storage, with the
 * worker an entry point beside the routes; http/ (the middleware the wiring
 * builds the app from) below the routers; providers below the domain, reaching
 * files only through the tools they are given; config.ts below everything that
 * reads it; media/ (ffmpeg, sharp, probing, voice activity) below all of them;
 * console-page/ apart (a browser script). Every folder of server/ is one of
 * these rooms. Read off the sources' imports, so a change that breaks a rule fails
 * here naming the file and the import, not in a review months later. Type-only
 * imports are not dependencies at run time and are allowed (a route may name
 * `Db`), except where a rule says otherwise.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { importsOf, runtimeImports, SERVER, sources } from '../helpers/imports.ts';

/** The imports of files under `dir` that `allowed` refuses, as "file → import". */
function violations(dir: string, allowed: (imported: string, file: string) => boolean): string[] {
  return sources(dir).flatMap((file) =>
    runtimeImports(file)
      .filter((i) => !allowed(i, file))
      .map((i) => `${file} → ${i}`),
  );
}

/** Like `violations`, type-only imports included, for `files` (relative to server/). */
function anyViolations(files: string[], allowed: (imported: string) => boolean): string[] {
  return files.flatMap((file) =>
    importsOf(file)
      .filter((i) => !allowed(i.target))
      .map((i) => `${file} → ${i.target}`),
  );
}

/** The composition root and the entry points: imported by nothing below them. */
const ROOT_FILES = /^(app|server|main)\.ts$|^cli\//;

describe('layers', () => {
  it('when the routes are read, then none imports storage (they go through the domain)', () => {
    assert.deepEqual(
      violations('routes', (i) => !i.startsWith('storage/')),
      [],
    );
  });

  it('when the worker is read, then it changes tasks and assets only through the domain: of storage it uses transactions, the job queue, remote-call records and temp files', () => {
    const own = new Set(['storage/db.ts', 'storage/jobs.ts', 'storage/remote-calls.ts', 'storage/blobs.ts']);
    assert.deepEqual(
      violations('worker', (i) => !i.startsWith('storage/') || own.has(i)),
      [],
    );
  });

  it('when storage is read, then it imports nothing from the layers above it', () => {
    assert.deepEqual(
      violations('storage', (i) => !/^(domain|routes|http|worker|providers|cli)\//.test(i)),
      [],
    );
  });

  it('when the domain is read, then it imports nothing from routes, http or the worker', () => {
    assert.deepEqual(
      violations('domain', (i) => !/^(routes|http|worker)\//.test(i)),
      [],
    );
  });

  it('when the domain is read, then nothing of HTTP is in it, not even a type: no http/ or routes/ module (so no ApiError and no status), no express or node:http; its refusals are domain errors (domain/errors.ts) that http/error-map.ts maps', () => {
    const http = /^(http|routes)\/|^(express|node:https?|https?)$/;
    assert.deepEqual(
      anyViolations(sources('domain'), (i) => !http.test(i)),
      [],
    );
    assert.ok(
      importsOf('http/error-map.ts').some((i) => i.target === 'domain/errors.ts'),
      'the mapping reads the domain errors, not the other way round',
    );
    // And no error is built with a status, whatever its class is called or wherever it lives.
    const withStatus = sources('domain').filter((file) => /new \w*Error\(\s*[1-5]\d\d\b/.test(fs.readFileSync(path.join(SERVER, file), 'utf8')));
    assert.deepEqual(withStatus, []);
  });

  it('when http/ is read, then it imports no router, no entry point and not the wiring (routers are passed in by app.ts), not even for a type', () => {
    assert.deepEqual(
      anyViolations(sources('http'), (i) => !i.startsWith('routes/') && !ROOT_FILES.test(i)),
      [],
    );
  });

  it('when a provider is read, then it imports no storage, domain, http, routes or worker code: files come through the tools it is given (types of the domain are allowed)', () => {
    assert.deepEqual(
      violations('providers', (i) => !/^(storage|domain|http|routes|worker|cli)\//.test(i) && !ROOT_FILES.test(i) && i !== 'deps.ts'),
      [],
    );
  });

  it('when config.ts is read, then it imports nothing of the floors above it (domain, http, routes, storage, providers, worker), not even for a type', () => {
    assert.deepEqual(
      anyViolations(['config.ts'], (i) => !/^(domain|http|routes|storage|providers|worker|cli)\//.test(i) && !ROOT_FILES.test(i) && i !== 'deps.ts'),
      [],
    );
  });

  it('when media/ is read, then it imports nothing of the floors above it (domain, http, routes, storage, providers, worker): the media tools serve them all', () => {
    assert.deepEqual(
      violations('media', (i) => !/^(domain|http|routes|storage|providers|worker|cli|console-page)\//.test(i) && !ROOT_FILES.test(i)),
      [],
    );
  });

  it("when console-page/ is read, then at run time it imports no server code outside its folder (the page's script is bundled for the browser; its build names the router's type only)", () => {
    assert.deepEqual(
      violations('console-page', (i) => !/^(domain|http|routes|storage|providers|worker|cli|media)\//.test(i) && !/^[\w-]+\.ts$/.test(i)),
      [],
    );
  });

  it('when server/ is read, then every folder with code is a room one of these rules reads (a new room needs its rule)', () => {
    const ruled = ['routes', 'worker', 'storage', 'domain', 'http', 'providers', 'media', 'console-page', 'cli'];
    const rooms = fs
      .readdirSync(SERVER, { withFileTypes: true })
      .filter((e) => e.isDirectory() && sources(e.name).length > 0)
      .map((e) => e.name);
    assert.deepEqual(
      rooms.filter((room) => !ruled.includes(room)),
      [],
    );
  });

  it('when a migration is read, then it imports no live code (a migration is frozen at its version)', () => {
    const migrations = sources('storage/migrations').filter((f) => /\/\d{3}_[^/]+\.ts$/.test(f));
    assert.ok(migrations.length >= 14, `found ${migrations.length} migrations`);
    assert.deepEqual(
      migrations.flatMap((file) => runtimeImports(file).map((i) => `${file} → ${i}`)),
      [],
    );
  });

  it('when the rule is checked against a breaking import, then it is caught (the scan reads what it should)', () => {
    assert.ok(runtimeImports('worker/worker.ts').includes('storage/jobs.ts'), 'the worker imports the queue');
    assert.ok(runtimeImports('domain/tasks.ts').includes('storage/tasks.ts'), 'the domain imports storage');
    assert.ok(!runtimeImports('http/context.ts').includes('storage/db.ts'), 'a type-only import does not count');
    assert.ok(
      importsOf('http/context.ts').some((i) => i.target === 'storage/db.ts' && i.typeOnly),
      'but it is read, for the rules that count it',
    );
    assert.ok(runtimeImports('server.ts').includes('storage/s3-blobs.ts'), 'an import() is read');
  });
});
