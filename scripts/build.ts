/**
 * Compiles the server for production: `npm start`, `gemforge admin …` and
 * `gemforge worker` run these bundles, not the TypeScript sources through tsx
 * (which compiled every module at each start and kept esbuild's service process
 * beside the server). Run by scripts/build.mjs (`npm run build`, npm's
 * `prepare` after `npm ci`, and `npm start` when dist/ is missing or stale).
 *
 * What it writes, all in dist/app (ESM, Node 24, one shared chunk set):
 * - `main.mjs` (server/main.ts), `admin.mjs` and `worker.mjs` (server/cli/);
 * - one entry per worker-thread module (the `./x.ts` files handed to
 *   `typescriptWorker` or `threadPool`, found by reading the sources), named after it;
 * - the console page's script, bundled for browsers and built into the
 *   server as a string constant.
 * Packages stay imports of node_modules (native modules, and the
 * borrowed-internals adapters resolve library files at run time).
 *
 * Source paths stay true: every `import.meta.dirname`, `.filename` and `.url`
 * in a repository module is rewritten to name that module's source location, so
 * code that reads the contracts, the catalog or the console page's HTML beside
 * itself reads the same files compiled as under tsx.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire, isBuiltin } from 'node:module';
import { isDeepStrictEqual } from 'node:util';
import { build, type Plugin } from 'esbuild';
import { bundleConsoleScript } from '../server/console-page/build.ts';
import { PARSED_YAML_DIR, parseYaml, parsedYamlName } from '../server/yaml-file.ts';
import { writeWhole } from '../server/write-whole.ts';
import { checkContractAtBuild } from '../server/http/validator-routes.ts';
import { writeBuiltDictionary } from '../server/providers/moderation/dictionary.ts';
import { BUILT_TRIES_DIR } from '../server/providers/moderation/letter-trie.ts';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { loadConfig } from '../server/config.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const OUT = path.join(ROOT, 'dist/app');

/** Every module started on a worker thread: the `new URL('./x.ts', import.meta.url)` beside a `typescriptWorker` or `threadPool` call. */
export function threadModules(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (entry.name.endsWith('.ts')) {
        const text = fs.readFileSync(file, 'utf8');
        if (!/\b(?:typescriptWorker|threadPool)[<(]/.test(text)) continue;
        for (const m of text.matchAll(/new URL\('\.\/([\w-]+\.ts)', import\.meta\.url\)/g)) found.push(path.join(dir, m[1]!));
      }
    }
  };
  walk(path.join(ROOT, 'server'));
  return found;
}

/** Rewrites import.meta's location fields in repository modules to their source location (module header). */
const sourceLocations: Plugin = {
  name: 'gemforge-source-locations',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const rel = path.relative(ROOT, args.path).split(path.sep).join('/');
      const contents = fs
        .readFileSync(args.path, 'utf8')
        .replace(/\bimport\.meta\.dirname\b/g, `__gfSource(${JSON.stringify(path.posix.dirname(rel))})`)
        .replace(/\bimport\.meta\.filename\b/g, `__gfSource(${JSON.stringify(rel)})`)
        .replace(/\bimport\.meta\.url\b/g, `__gfSourceUrl(${JSON.stringify(rel)})`);
      return { contents, loader: 'ts' };
    });
  },
};

/**
 * Node builtins that the bundles take through `require`, not as ES modules. An ES
 * import of a builtin gives its ESM facade, which reads every export once, getters
 * included: `node:http`'s `WebSocket`, `CloseEvent` and `MessageEvent` getters then
 * load Node's bundled undici, and undici `node:http2`, `node:tls` and `node:zlib`
 * (about 60 ms of a start that needs none of them; `require` leaves getters unread).
 * `node:https` (tls, ~50 ms) is loaded at its first use: the code asks it only for
 * an https upstream. Named imports of `node:http` get its plain (non-getter) exports;
 * `node:https` offers only its default export (any other import fails the build).
 */
const BUILTINS_BY_REQUIRE: Record<string, 'now' | 'at first use'> = { 'node:http': 'now', 'node:https': 'at first use' };

export const builtinsByRequire: Plugin = {
  name: 'gemforge-builtins-by-require',
  setup(b) {
    b.onResolve({ filter: /^(node:)?https?$/ }, (args) => {
      const id = args.path.startsWith('node:') ? args.path : `node:${args.path}`;
      // The shim's own require of the builtin stays external.
      if (args.namespace === 'gemforge-builtin' || !(id in BUILTINS_BY_REQUIRE)) return undefined;
      return { path: id, namespace: 'gemforge-builtin' };
    });
    b.onLoad({ filter: /.*/, namespace: 'gemforge-builtin' }, (args) => {
      const header = `import { createRequire as __gfCreateRequire } from 'node:module';
const __gfRequire = __gfCreateRequire(import.meta.url);
`;
      if (BUILTINS_BY_REQUIRE[args.path] === 'at first use') {
        const contents = `${header}let loaded;
const load = () => (loaded ??= __gfRequire(${JSON.stringify(args.path)}));
export default new Proxy({}, { get: (_, key) => load()[key], has: (_, key) => key in load() });
`;
        return { contents, loader: 'js' };
      }
      const real = createRequire(import.meta.url)(args.path) as Record<string, unknown>;
      const plain = Object.keys(real).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k) && !Object.getOwnPropertyDescriptor(real, k)?.get);
      const contents = `${header}const m = __gfRequire(${JSON.stringify(args.path)});
export default m;
export const { ${plain.join(', ')} } = m;
`;
      return { contents, loader: 'js' };
    });
  },
};

/**
 * Packages bundled into dist/app rather than loaded from node_modules at run
 * time, with every package they import. A start loaded about 860 files from
 * node_modules: knex alone about 330 (250 of them lodash's one-function modules),
 * express-openapi-validator about 350 (ajv 90), express 130, obscenity 29;
 * Node's CommonJS loader resolved each one (stat calls, realpath, its
 * package.json read), read and wrapped it, at every start. Bundled they are
 * parts of a few chunks (docs/performance.md, Start-up and memory).
 *
 * What the server patches is patched in the bundle: the knex adapter
 * (server/storage/engine/knex-adapter.ts) imports knex's SQLite dialect, bundled
 * beside it, and changes instances; validator-routes.ts imports the validator's
 * files it patches (and `path-to-regexp`, which the validator requires),
 * so they are the bundled validator's own; the validator and the server share
 * one bundled express. pino stays in node_modules (its transports start
 * threads on its own files), as do native modules and what the first request
 * never loads.
 */
const BUNDLED_PACKAGES = new Set(['knex', 'obscenity', 'express', 'express-openapi-validator', 'path-to-regexp']);
/** Never bundled, even where a bundled package asks: native modules and database drivers (knex's dialects require theirs at first use). */
const NEVER_BUNDLED = new Set(['sqlite3', 'better-sqlite3', 'pg', 'pg-native', 'pg-query-stream', 'mysql', 'mysql2', 'mariadb', 'oracledb', 'tedious']);

/**
 * `node:url` as the bundled packages get it: its legacy `parse` (and `resolve`,
 * `resolveObject`, `format` of a string, which parse) without the deprecation
 * warning (DEP0169) that Node prints only for callers outside node_modules, as
 * the bundled packages now are (express's parseurl, the validator's parameter
 * reshaping, the ref parser): what they do is unchanged, and stderr too.
 */
const LEGACY_URL = `const url = require('node:url');
function parse(u, parseQueryString, slashesDenoteHost) {
  if (u instanceof url.Url) return u;
  const parsed = new url.Url();
  parsed.parse(u, parseQueryString, slashesDenoteHost);
  return parsed;
}
module.exports = {
  ...url,
  parse,
  resolve: (source, relative) => parse(source, false, true).resolve(relative),
  resolveObject: (source, relative) => (source ? parse(source, false, true).resolveObject(relative) : relative),
  format: (u, options) => url.format(typeof u === 'string' ? parse(u) : u, options),
};
`;

/** Which packages are bundled (BUNDLED_PACKAGES and what they import), the others left to node_modules. */
export const bundledPackages: Plugin = {
  name: 'gemforge-bundled-packages',
  setup(b) {
    b.onResolve({ filter: /^(node:)?url$/ }, (args) => {
      if (args.namespace === 'gemforge-url' || !args.importer.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      return { path: 'node:url', namespace: 'gemforge-url' };
    });
    b.onLoad({ filter: /.*/, namespace: 'gemforge-url' }, () => ({ contents: LEGACY_URL, loader: 'js' }));
    // A bare specifier: a package (or one of its files), or a Node builtin.
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:') || isBuiltin(args.path)) return { path: args.path, external: true };
      const name = args.path
        .split('/')
        .slice(0, args.path.startsWith('@') ? 2 : 1)
        .join('/');
      // Files of node_modules reach the build only through a bundled package: what they import is bundled too.
      const fromBundled = args.importer.includes(`${path.sep}node_modules${path.sep}`);
      if ((BUNDLED_PACKAGES.has(name) || fromBundled) && !NEVER_BUNDLED.has(name)) return undefined;
      return { path: args.path, external: true };
    });
  },
};

/** The bundled CommonJS packages' `require` (of Node builtins, of what stays in node_modules), which esbuild's shim calls. */
export const REQUIRE_BANNER =
  "import { createRequire as __gfCreateRequireForBundled } from 'node:module';\nconst require = __gfCreateRequireForBundled(import.meta.url);";

/** In every output file: the repository root (two levels above dist/app) and the helpers the rewrite calls. */
const BANNER = [
  "import { join as __gfJoin } from 'node:path';",
  "import { pathToFileURL as __gfFileUrl } from 'node:url';",
  "const __gfRoot = __gfJoin(import.meta.dirname, '..', '..');",
  'const __gfSource = (rel) => __gfJoin(__gfRoot, rel);',
  'const __gfSourceUrl = (rel) => __gfFileUrl(__gfJoin(__gfRoot, rel)).href;',
  REQUIRE_BANNER,
].join('\n');

/** The YAML files of the tree (the contracts, the catalogs) parsed into dist/yaml, named by their text's hash (server/yaml-file.ts). */
async function parseYamlFiles(): Promise<void> {
  const files = [
    ...fs.readdirSync(path.join(ROOT, 'openapi')).map((f) => path.join(ROOT, 'openapi', f)),
    ...(fs.readdirSync(path.join(ROOT, 'server'), { recursive: true }) as string[]).map((f) => path.join(ROOT, 'server', f)),
  ].filter((f) => /\.ya?ml$/.test(f));
  fs.mkdirSync(PARSED_YAML_DIR, { recursive: true });
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch {
      continue; // a broken file is parsed, and reported, where the server reads it
    }
    const json = JSON.stringify(doc);
    if (!isDeepStrictEqual(JSON.parse(json), doc)) continue; // what JSON cannot hold (.inf, .nan) is parsed at run time
    // Written whole, then renamed: a concurrent build or a starting server never reads half a file.
    writeWhole(path.join(PARSED_YAML_DIR, parsedYamlName(text)), json);
    // A contract is also checked against the OpenAPI schema here, so the server need not compile that schema at each start.
    if (path.dirname(file) === path.join(ROOT, 'openapi') && typeof (doc as { openapi?: unknown })?.openapi === 'string') {
      await checkContractAtBuild(text, doc as { openapi: string });
    }
  }
}

/**
 * The shipped moderation policy's vocabulary tries as the server holds them (letter-trie.ts), so a
 * start reads them instead of building them. Built afresh: the copies of earlier builds are removed
 * first (they are named by the words and code they were made from, and none would be read again).
 */
function writeBuiltTries(): void {
  fs.rmSync(BUILT_TRIES_DIR, { recursive: true, force: true });
  loadModerationPolicy(loadConfig({}).moderationPolicyPath).vocabulary.writeTries(BUILT_TRIES_DIR);
}

/** The package.json of the node_modules package a bundled file belongs to, or undefined for a repository file. */
function packageJsonOf(file: string): string | undefined {
  const m = /^(.*[/\\]node_modules[/\\](?:@[^/\\]+[/\\])?[^/\\]+)[/\\]/.exec(file);
  return m ? path.join(m[1]!, 'package.json') : undefined;
}

/** How every server bundle is built (the tests' small bundles too): ESM for the Node the project runs on. */
export const NODE_BUNDLE = { bundle: true, platform: 'node', format: 'esm', target: 'node24' } as const;

/** Builds dist/app; returns every file read (paths relative to the root) for dist/build.json. */
export async function buildDist(): Promise<string[]> {
  await parseYamlFiles();
  // The moderation's English dictionary as the server holds it, so a start reads it instead of building it.
  writeBuiltDictionary();
  writeBuiltTries();
  const consoleScript = await bundleConsoleScript();
  const threads = threadModules();
  const names = threads.map((f) => path.basename(f, '.ts'));
  if (new Set(names).size !== names.length) throw new Error(`two worker-thread modules share a name: ${names.join(', ')}`);
  const staging = fs.mkdtempSync(path.join(ROOT, 'dist', '.app-'));
  try {
    const result = await build({
      absWorkingDir: ROOT,
      entryPoints: {
        main: 'server/main.ts',
        admin: 'server/cli/admin.ts',
        worker: 'server/cli/worker.ts',
        ...Object.fromEntries(threads.map((f, i) => [names[i], f])),
      },
      outdir: staging,
      outExtension: { '.js': '.mjs' },
      ...NODE_BUNDLE,
      splitting: true,
      // Names and line numbers stay readable in stack traces and profiles; the size saved by minifying is not worth them.
      sourcemap: 'linked',
      metafile: true,
      logLevel: 'warning',
      banner: { js: BANNER },
      define: { __GEMFORGE_COMPILED__: 'true', __GEMFORGE_CONSOLE_JS__: JSON.stringify(consoleScript.js) },
      plugins: [builtinsByRequire, bundledPackages, sourceLocations],
    });
    // Concurrent builds (two `npm start`s on a stale tree) write the same files: renames keep each one whole.
    fs.mkdirSync(OUT, { recursive: true });
    const written = new Set(fs.readdirSync(staging));
    for (const name of written) fs.renameSync(path.join(staging, name), path.join(OUT, name));
    // Chunks of earlier builds (their names carry a content hash) are no longer imported.
    for (const name of fs.readdirSync(OUT)) if (!written.has(name)) fs.rmSync(path.join(OUT, name), { force: true });
    const inputs = [
      // (The builtins' shims are not files.) A bundled package counts by its package.json (its version): a start stats each input.
      ...Object.keys(result.metafile.inputs)
        .filter((f) => !f.startsWith('gemforge-builtin:') && !f.startsWith('gemforge-url:'))
        .map((f) => packageJsonOf(path.resolve(ROOT, f)) ?? path.resolve(ROOT, f)),
      ...consoleScript.inputs,
      import.meta.filename,
      path.join(ROOT, 'scripts/dist.mjs'),
      path.join(ROOT, 'scripts/build.mjs'),
    ];
    return inputs.map((f) => path.relative(ROOT, f).split(path.sep).join('/'));
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}
