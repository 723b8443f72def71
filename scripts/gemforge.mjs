#!/usr/bin/env node
// The `gemforge` command inside this repository. `admin …` and `worker` act on the
// server's data (DATA_DIR / DATABASE_URL) and run the compiled server's code in
// dist/ (scripts/build.mjs) when it matches the sources, else the sources through
// tsx: an edited tree never runs a stale build. Every other command is the API
// client CLI (client/cli/, run from its sources; the @gemforge/client package ships
// the same CLI built, as its own `gemforge` bin, without admin and worker).
import module from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { APP, DIST, staleReason } from './dist.mjs';

const [command, ...rest] = process.argv.slice(2);
const serverSide = command === 'admin' || command === 'worker';
const compiled = serverSide && staleReason() === undefined;
if (compiled) module.enableCompileCache(path.join(DIST, 'compile-cache'));
else (await import('tsx/esm/api')).register();
const load = (name, source) => import(compiled ? pathToFileURL(path.join(APP, `${name}.mjs`)).href : source);
let code;
if (command === 'admin') {
  const { runAdmin } = await load('admin', '../server/cli/admin.ts');
  code = await runAdmin(rest);
} else if (command === 'worker') {
  const { runWorker } = await load('worker', '../server/cli/worker.ts');
  code = await runWorker();
} else {
  // The API client CLI (client/cli): models, upload, voices, image, video, speech, music, text, extract, task.
  const { runCli } = await import('../client/cli/main.ts');
  code = await runCli(process.argv.slice(2));
}
process.exitCode = code;
