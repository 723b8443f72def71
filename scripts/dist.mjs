/**
 * The compiled server in dist/ and whether it still matches the sources.
 * Plain JavaScript on purpose: `npm start`, `scripts/gemforge.mjs` and the
 * compiled entries themselves ask it before anything else loads, and it must
 * answer in milliseconds, without tsx.
 *
 * dist/build.json lists every file the build read (repository sources and, for
 * each package bundled from node_modules, its package.json, from esbuild's
 * metafile, plus the build script)
 * with its size, modification time and SHA-1. The build is fresh when each one
 * is unchanged: same size and time, or, when only the time moved (a checkout, a
 * copy), the same content. A new source file can only matter once a listed file
 * imports it, and that file then changed. Files read at run time (the contracts,
 * the catalog, the console page's HTML and CSS) are not in the build: they are
 * always read from the tree.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..');
export const DIST = path.join(ROOT, 'dist');
export const MANIFEST = path.join(DIST, 'build.json');
/** The bundles esbuild wrote (entries, worker-thread entries, shared chunks). */
export const APP = path.join(DIST, 'app');

const sha1 = (file) => crypto.createHash('sha1').update(fs.readFileSync(file)).digest('hex');

/** The manifest entry of one input file (a path relative to the repository root). */
export function fingerprint(rel) {
  const file = path.join(ROOT, rel);
  const st = fs.statSync(file);
  return { size: st.size, mtimeMs: st.mtimeMs, sha1: sha1(file) };
}

/** Writes dist/build.json for the given inputs (paths relative to the root). */
export function writeManifest(inputs) {
  const files = {};
  for (const rel of [...new Set(inputs)].sort()) files[rel] = fingerprint(rel);
  const tmp = `${MANIFEST}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify({ node: process.version, files }, null, 1) + '\n');
  fs.renameSync(tmp, MANIFEST);
}

/**
 * Why dist/ cannot be run as it is (`dist/ was never built`, `server/app.ts changed`),
 * or undefined when it matches the sources.
 */
export function staleReason() {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'));
  } catch {
    return 'dist/ was never built';
  }
  for (const [rel, was] of Object.entries(manifest.files ?? {})) {
    const file = path.join(ROOT, rel);
    let st;
    try {
      st = fs.statSync(file);
    } catch {
      return `${rel} is gone`;
    }
    if (st.size !== was.size) return `${rel} changed`;
    if (st.mtimeMs !== was.mtimeMs && sha1(file) !== was.sha1) return `${rel} changed`;
  }
  return undefined;
}

/**
 * For the compiled entries: stops the process when dist/ no longer matches the
 * sources, so an edited tree never runs yesterday's code without a word.
 */
export function refuseStale(what) {
  const reason = staleReason();
  if (!reason) return;
  console.error(
    `gemforge: the compiled ${what} in dist/ is stale (${reason}): run "npm run build" (npm start rebuilds by itself), or "npm run dev" while editing`,
  );
  process.exit(1);
}
