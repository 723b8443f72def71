/**
 * `npm run bench`: runs every benchmark script scripts/bench-*.ts in turn, each
 * in its own Node process, and fails when any of them fails.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const dir = import.meta.dirname;
const benches = fs
  .readdirSync(dir)
  .filter((f) => /^bench-.+\.ts$/.test(f))
  .sort();
let failed = 0;
for (const file of benches) {
  console.log(`\n== ${file}`);
  const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(dir, file)], { stdio: 'inherit' });
  if (run.status !== 0) failed++;
}
console.log(`\n${benches.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
