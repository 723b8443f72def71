#!/usr/bin/env node
// The `gemforge` command inside this repository. `admin …` and `worker` act on the
// server's data (DATA_DIR / DATABASE_URL); every other command is the API client CLI
// (client/cli/, run from its sources; the @gemforge/client package ships the same CLI
// built, as its own `gemforge` bin, without admin and worker).
import { register } from 'tsx/esm/api';

register();
const [command, ...rest] = process.argv.slice(2);
let code;
if (command === 'admin') {
  const { runAdmin } = await import('../server/cli/admin.ts');
  code = await runAdmin(rest);
} else if (command === 'worker') {
  const { runWorker } = await import('../server/cli/worker.ts');
  code = await runWorker();
} else {
  // The API client CLI (client/cli): models, upload, voices, image, video, speech, music, text, extract, task.
  const { runCli } = await import('../client/cli/main.ts');
  code = await runCli(process.argv.slice(2));
}
process.exitCode = code;
