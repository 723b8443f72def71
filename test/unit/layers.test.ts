/**
 * The layering rule: routes → domain → storage, with the
 * worker an entry point beside the routes. Read off the sources' imports, so a
 * change that breaks a rule fails here naming the file and the import, not in a
 * review months later. Type-only imports are not dependencies at run time and
 * are allowed (a route may name `Db`).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const SERVER = path.resolve(import.meta.dirname, '../../server');

/** Every .ts file under `dir` (relative to server/). */
function sources(dir: string): string[] {
  return (fs.readdirSync(path.join(SERVER, dir), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')).map((f) => path.join(dir, f));
}

/** The modules `file` imports at run time, as paths relative to server/ (packages as written). */
function runtimeImports(file: string): string[] {
  const text = fs.readFileSync(path.join(SERVER, file), 'utf8');
  const found: string[] = [];
  for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
    if (m[1]) continue;
    const spec = m[2]!;
    found.push(spec.startsWith('.') ? path.relative(SERVER, path.resolve(path.dirname(path.join(SERVER, file)), spec)) : spec);
  }
  return found;
}

/** The imports of files under `dir` that `allowed` refuses, as "file → import". */
function violations(dir: string, allowed: (imported: string, file: string) => boolean): string[] {
  return sources(dir).flatMap((file) => runtimeImports(file).filter((i) => !allowed(i, file)).map((i) => `${file} → ${i}`));
}

describe('layers', () => {
  it('when the routes are read, then none imports storage (they go through the domain)', () => {
    assert.deepEqual(violations('routes', (i) => !i.startsWith('storage/')), []);
  });

  it('when the worker is read, then it changes tasks and assets only through the domain: of storage it uses transactions, the job queue, remote-call records and temp files', () => {
    const own = new Set(['storage/db.ts', 'storage/jobs.ts', 'storage/remote-calls.ts', 'storage/blobs.ts']);
    assert.deepEqual(violations('worker', (i) => !i.startsWith('storage/') || own.has(i)), []);
  });

  it('when storage is read, then it imports nothing from the layers above it', () => {
    assert.deepEqual(violations('storage', (i) => !/^(domain|routes|http|worker|providers|cli)\//.test(i)), []);
  });

  it('when the domain is read, then it imports nothing from routes, http or the worker', () => {
    assert.deepEqual(violations('domain', (i) => !/^(routes|http|worker)\//.test(i)), []);
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
  });
});
