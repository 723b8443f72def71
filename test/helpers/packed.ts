/**
 * The client package as an application installs it: `npm pack ./client` (its
 * prepack builds dist/ with tsc), then a fresh project that depends on the
 * tarball, installed offline. After `npm ci` a machine's npm cache holds the
 * tarballs of the repository's lock but no registry metadata, so the project
 * gets the lock that `npm install <tarball>` would write (the package's own
 * dependencies copied from the repository's lock) and `npm ci --offline`
 * installs from the packed file and the cache alone.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run } from './run.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const CLIENT_DIR = path.join(ROOT, 'client');

interface LockEntry {
  version: string;
  resolved?: string;
  integrity?: string;
  license?: string;
  dependencies?: Record<string, string>;
  bin?: Record<string, string>;
  engines?: Record<string, string>;
}

/** Runs npm and fails with its output when it fails. */
async function npm(args: string[], cwd: string): Promise<string> {
  const out = await run('npm', args, { cwd, env: { ...process.env, npm_config_update_notifier: 'false' }, timeout: 120_000 });
  assert.equal(out.code, 0, `npm ${args.join(' ')}\n${out.stdout}\n${out.stderr}`);
  return out.stdout;
}

/** Packs client/ into `dir`; returns the tarball's path. */
export async function packClient(dir: string): Promise<string> {
  const [info] = JSON.parse(await npm(['pack', CLIENT_DIR, '--pack-destination', dir, '--json', '--silent'], ROOT)) as Array<{ filename: string }>;
  return path.join(dir, info.filename);
}

/** The repository's lock entries of `names` and everything they depend on (hoisted at the top level). */
function closure(names: string[]): Record<string, LockEntry> {
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const out: Record<string, LockEntry> = {};
  const todo = [...names];
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    const key = `node_modules/${name}`;
    if (out[key]) continue;
    const entry = lock.packages[key];
    assert.ok(entry, `the repository's lock has ${name} (the client package depends on it)`);
    const { version, resolved, integrity, license, dependencies } = entry;
    out[key] = { version, resolved, integrity, license, dependencies };
    todo.push(...Object.keys(dependencies ?? {}));
  }
  return out;
}

/** A fresh ESM project in `dir` with the packed client installed; returns the project's folder. */
export async function installPacked(tarball: string, dir: string): Promise<string> {
  const app = path.join(dir, 'app');
  fs.mkdirSync(app, { recursive: true });
  fs.copyFileSync(tarball, path.join(app, path.basename(tarball)));
  const pkg = JSON.parse(fs.readFileSync(path.join(CLIENT_DIR, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    license: string;
    dependencies: Record<string, string>;
    bin: Record<string, string>;
    engines: Record<string, string>;
  };
  const spec = `file:${path.basename(tarball)}`;
  const manifest = { name: 'app', version: '1.0.0', private: true, type: 'module', dependencies: { [pkg.name]: spec } };
  const integrity = `sha512-${crypto.createHash('sha512').update(fs.readFileSync(tarball)).digest('base64')}`;
  const lock = {
    name: 'app',
    version: '1.0.0',
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: 'app', version: '1.0.0', dependencies: { [pkg.name]: spec } },
      [`node_modules/${pkg.name}`]: {
        version: pkg.version,
        resolved: spec,
        integrity,
        license: pkg.license,
        dependencies: pkg.dependencies,
        bin: pkg.bin,
        engines: pkg.engines,
      },
      ...closure(Object.keys(pkg.dependencies)),
    },
  };
  fs.writeFileSync(path.join(app, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  fs.writeFileSync(path.join(app, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);
  await npm(['ci', '--offline', '--no-audit', '--no-fund'], app);
  return app;
}
