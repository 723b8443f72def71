#!/usr/bin/env node
/**
 * `npm run build` (also npm's `prepare`, so `npm ci` builds): compiles the
 * server into dist/ (scripts/build.ts) and records what it was built from
 * (scripts/dist.mjs). `--if-stale`, as `npm start` runs it, builds only when
 * dist/ is missing or no longer matches the sources, and otherwise costs a few
 * milliseconds of stat calls. Plain JavaScript so that the fresh case needs no
 * tsx; tsx is loaded only to build.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DIST, staleReason, writeManifest } from './dist.mjs';

/**
 * dist/server.mjs, what `npm start` runs: refuses to run a stale build, then
 * keeps V8's compiled code of the bundles and of node_modules in dist/compile-cache
 * (Node's compile cache, checked against each file's content), so a start after
 * the first does not compile them again; the cache is written a few seconds in,
 * once start-up has loaded what it loads.
 */
const SERVER_ENTRY = `// Written by scripts/build.mjs: the compiled server (see scripts/build.mjs and scripts/dist.mjs).
import module from 'node:module';
import { fileURLToPath } from 'node:url';
import { refuseStale } from '../scripts/dist.mjs';
refuseStale('server');
module.enableCompileCache(fileURLToPath(new URL('compile-cache', import.meta.url)));
setTimeout(() => module.flushCompileCache(), 5000).unref();
await import('./app/main.mjs');
`;

const ifStale = process.argv.includes('--if-stale');
const reason = staleReason();
if (ifStale && !reason) process.exit(0);

const started = Date.now();
fs.mkdirSync(DIST, { recursive: true });
const { register } = await import('tsx/esm/api');
register();
const { buildDist } = await import('./build.ts');
try {
  const inputs = await buildDist();
  // The entry `npm start` runs: it refuses to serve when the sources changed after this build.
  fs.writeFileSync(path.join(DIST, 'server.mjs'), SERVER_ENTRY);
  writeManifest(inputs);
} catch (error) {
  console.error(`gemforge: the build failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
if (ifStale) console.error(`gemforge: compiled the server into dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s (${reason})`);
