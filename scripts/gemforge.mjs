#!/usr/bin/env node
// The `gemforge` command. `admin …` and `worker` act on the server's data
// (DATA_DIR / DATABASE_URL); every other command is the API client CLI.
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
  process.stderr.write(
    'usage: gemforge admin <command>   (account, key and ledger administration; run "gemforge admin" for the list)\n',
  );
  code = 2;
}
process.exitCode = code;
