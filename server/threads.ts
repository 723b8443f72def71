/**
 * Worker threads that run one of the server's modules. From the sources (tsx)
 * a worker does not inherit the loader, so its first act is to register tsx's
 * API and then import the TypeScript module. The compiled server
 * (scripts/build.ts) built each worker module as an entry of its own in
 * dist/app, named after the module, and starts that. Undefined when neither
 * can be found (the caller then does the work on its own thread).
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** True in the compiled server (esbuild `define`); undeclared when running from the sources. */
declare const __GEMFORGE_COMPILED__: boolean | undefined;

function tsxApi(): string | undefined {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
}

/** The worker module at `moduleUrl` (a file: URL of its TypeScript source) on a thread, or undefined. */
export function typescriptWorker(moduleUrl: string): Worker | undefined {
  if (typeof __GEMFORGE_COMPILED__ === 'boolean') {
    // In the bundle import.meta.dirname still names server/ (scripts/build.ts keeps source paths).
    const name = path.basename(fileURLToPath(moduleUrl), '.ts');
    return new Worker(pathToFileURL(path.join(import.meta.dirname, '../dist/app', `${name}.mjs`)));
  }
  const api = tsxApi();
  if (!api) return undefined;
  const bootstrap = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(moduleUrl)}); })`;
  return new Worker(bootstrap, { eval: true });
}
