/**
 * The console page: its HTML and CSS read from this folder, and its script
 * (main.ts with openapi-fetch) bundled by esbuild. The compiled server
 * (`npm start`, scripts/build.ts) carries the script bundled at build time, so
 * no esbuild service process runs beside it; under tsx (`npm run dev`, tests)
 * it is bundled in memory, once per process, at start. Nothing is fetched at
 * run time either way.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ConsolePage } from '../routes/console-page.ts';

/** The script bundled by scripts/build.ts (esbuild `define`); undefined when running from the sources. */
declare const __GEMFORGE_CONSOLE_JS__: string | undefined;

const here = import.meta.dirname;
let built: Promise<ConsolePage> | undefined;

/** The page's script bundled for browsers, and the files it was made from (absolute paths). */
export async function bundleConsoleScript(): Promise<{ js: string; inputs: string[] }> {
  // Loaded only here: the compiled server never bundles, so it never loads esbuild.
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [path.join(here, 'main.ts')],
    bundle: true,
    write: false,
    metafile: true,
    absWorkingDir: path.resolve(here, '../..'),
    format: 'esm',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  return { js: result.outputFiles[0]!.text, inputs: Object.keys(result.metafile.inputs).map((f) => path.resolve(here, '../..', f)) };
}

export function buildConsolePage(): Promise<ConsolePage> {
  built ??= (async () => ({
    html: fs.readFileSync(path.join(here, 'index.html'), 'utf8'),
    css: fs.readFileSync(path.join(here, 'console.css'), 'utf8'),
    js: typeof __GEMFORGE_CONSOLE_JS__ === 'string' ? __GEMFORGE_CONSOLE_JS__ : (await bundleConsoleScript()).js,
  }))();
  return built;
}
