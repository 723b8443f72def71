#!/usr/bin/env node
/**
 * `node scripts/run-tests.mjs <test files…>`: node's test runner over TypeScript test files
 * (`node --import tsx --test`), as many files at a time as the machine has cores
 * (`os.availableParallelism()`, never fewer than 2 and by default never more than 4). `npm test`,
 * `npm run test:postgres` and CI run the suite through it, so a bigger CI machine runs more files
 * at once instead of the two a literal `--test-concurrency=2` allowed. Each file keeps its own
 * process. Four is the bound because the suite has been run with at most that many files beside
 * each other (two per suite, and more under other sessions' load): more at once would be a
 * combination nobody has run, in CI, where a flaky file means nothing lands.
 *
 * TEST_CONCURRENCY=<n> sets the number of files at a time instead (see docs/development.md,
 * "How long the whole suite takes").
 *
 * TEST_TIMES=<file>: every test file's wall time, exit code and CPU seconds (its own and
 * its children's) are appended to <file> (scripts/test-times.mjs), and when the run ends
 * the slowest 15 are printed to stderr.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The default's bound (see the head of this file). */
export const MAX_DEFAULT = 4;

/** Files at a time: TEST_CONCURRENCY, else the cores the process may use, at least 2 (a file often waits on a timer or a child), at most MAX_DEFAULT. */
export function testConcurrency(env = process.env, cores = os.availableParallelism()) {
  if (env.TEST_CONCURRENCY !== undefined && env.TEST_CONCURRENCY !== '') {
    const n = Number(env.TEST_CONCURRENCY);
    if (!Number.isInteger(n) || n < 1) throw new Error(`TEST_CONCURRENCY must be a whole number of files, at least 1; got "${env.TEST_CONCURRENCY}"`);
    return n;
  }
  return Math.min(MAX_DEFAULT, Math.max(2, cores));
}

/** The slowest `count` lines of a TEST_TIMES file, as a table. */
export function slowest(timesFile, count = 15) {
  const rows = fs
    .readFileSync(timesFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'))
    .sort((a, b) => Number(b[0]) - Number(a[0]));
  const lines = rows.slice(0, count).map(([wall, code, self, children, file]) => {
    return `${wall.padStart(7)} s  cpu ${self.padStart(5)} + ${children.padStart(5)} s  ${code === '0' ? '  ' : `!${code}`} ${path.relative(process.cwd(), file)}`;
  });
  return [`slowest ${lines.length} of ${rows.length} test files (wall, CPU own + children):`, ...lines].join('\n');
}

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error('usage: node scripts/run-tests.mjs <test files or node --test options>…');
    return 2;
  }
  let concurrency;
  try {
    concurrency = testConcurrency();
  } catch (error) {
    console.error(`run-tests: ${error.message}`);
    return 2;
  }
  const times = process.env.TEST_TIMES ? path.resolve(process.env.TEST_TIMES) : undefined;
  const hook = times ? ['--import', pathToFileURL(path.join(import.meta.dirname, 'test-times.mjs')).href] : [];
  // tsx as this repository resolves it, so the files may be run from any directory.
  const args = ['--import', import.meta.resolve('tsx'), ...hook, '--test', `--test-concurrency=${concurrency}`, ...files];
  const child = spawn(process.execPath, args, { stdio: 'inherit', env: times ? { ...process.env, TEST_TIMES: times } : process.env });
  // Ctrl-C reaches the runner too (same process group); this process waits for it to end.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  const code = await new Promise((resolve) =>
    child.once('exit', (c, signal) => {
      if (signal) console.error(`run-tests: the test runner ended on ${signal}`);
      resolve(c ?? 1);
    }),
  );
  if (times && fs.existsSync(times)) console.error(slowest(times));
  return code;
}

// Run, unless imported (test/unit/run-tests.test.ts reads the functions above).
if (process.argv[1] && fs.realpathSync(process.argv[1]) === import.meta.filename) process.exitCode = await main();
