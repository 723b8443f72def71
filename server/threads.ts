/**
 * Worker threads that run a TypeScript module: the server runs under tsx, and a
 * worker does not inherit its loader, so the worker's first act is to register
 * tsx's API and then import the module. Undefined when tsx's API cannot be
 * found (the caller then does the work on its own thread).
 */
import { Worker } from 'node:worker_threads';

function tsxApi(): string | undefined {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
}

/** A worker running the TypeScript module at `moduleUrl` (a file: URL), or undefined without tsx. */
export function typescriptWorker(moduleUrl: string): Worker | undefined {
  const api = tsxApi();
  if (!api) return undefined;
  const bootstrap = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(moduleUrl)}); })`;
  return new Worker(bootstrap, { eval: true });
}
