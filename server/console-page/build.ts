/**
 * Bundles the console page's script (main.ts with openapi-fetch) with esbuild,
 * in memory, once per process: the server builds it at start, so `npm start`
 * after `npm ci` serves it and nothing is fetched at run time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import type { ConsolePage } from '../routes/console-page.ts';

const here = import.meta.dirname;
let built: Promise<ConsolePage> | undefined;

export function buildConsolePage(): Promise<ConsolePage> {
  built ??= (async () => {
    const result = await build({
      entryPoints: [path.join(here, 'main.ts')],
      bundle: true,
      write: false,
      format: 'esm',
      target: 'es2022',
      minify: true,
      legalComments: 'none',
      logLevel: 'silent',
    });
    return {
      html: fs.readFileSync(path.join(here, 'index.html'), 'utf8'),
      css: fs.readFileSync(path.join(here, 'console.css'), 'utf8'),
      js: result.outputFiles[0]!.text,
    };
  })();
  return built;
}
