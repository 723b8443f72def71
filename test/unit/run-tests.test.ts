/**
 * scripts/run-tests.mjs, which runs the suite for `npm test`, `npm run test:postgres` and CI:
 * how many files it runs at a time, that a failing file fails the run, and what TEST_TIMES
 * records per file.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run } from '../helpers/run.ts';
// @ts-expect-error: a plain JavaScript script without declarations
import { slowest, testConcurrency } from '../../scripts/run-tests.mjs';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/run-tests.mjs');

it('when no TEST_CONCURRENCY is set, then as many files run at once as there are cores, never fewer than 2 nor more than 4', () => {
  assert.equal(testConcurrency({}, 1), 2);
  assert.equal(testConcurrency({}, 2), 2);
  assert.equal(testConcurrency({}, 3), 3);
  assert.equal(testConcurrency({}, 6), 4);
  assert.equal(testConcurrency({ TEST_CONCURRENCY: '' }, 8), 4);
});

it('when TEST_CONCURRENCY is set, then it is the number of files at once, and anything but a whole number from 1 is refused', () => {
  assert.equal(testConcurrency({ TEST_CONCURRENCY: '1' }, 8), 1);
  assert.equal(testConcurrency({ TEST_CONCURRENCY: '12' }, 2), 12);
  for (const bad of ['0', '-1', '2.5', 'two'])
    assert.throws(() => testConcurrency({ TEST_CONCURRENCY: bad }, 2), /TEST_CONCURRENCY must be a whole number/, bad);
});

it('when a test file fails, then the run exits non-zero, and TEST_TIMES records each file with its exit code and CPU, the failed one marked in the list printed at the end', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-run-tests-'));
  try {
    fs.writeFileSync(path.join(dir, 'passes.test.ts'), "import { it } from 'node:test';\nit('passes', () => {});\n");
    fs.writeFileSync(path.join(dir, 'fails.test.ts'), "import { it } from 'node:test';\nit('fails', () => { throw new Error('no'); });\n");
    const times = path.join(dir, 'times.tsv');
    // Without this test's runner context, which makes a nested node --test skip its files.
    const { NODE_TEST_CONTEXT: _context, ...outside } = process.env;
    const env = { ...outside, TEST_TIMES: times, TEST_CONCURRENCY: '2' };
    const r = await run(process.execPath, [SCRIPT, path.join(dir, 'passes.test.ts'), path.join(dir, 'fails.test.ts')], { cwd: dir, env });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const rows = fs
      .readFileSync(times, 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split('\t'));
    assert.deepEqual(rows.map((row) => [path.basename(row[4]!), row[1]]).sort(), [
      ['fails.test.ts', '1'],
      ['passes.test.ts', '0'],
    ]);
    for (const row of rows) for (const figure of row.slice(0, 4)) assert.match(figure, /^\d+(\.\d)?$/);
    assert.match(r.stderr, /slowest 2 of 2 test files/);
    assert.match(r.stderr, /!1 .*fails\.test\.ts/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

it('when the slowest files are listed, then they come by wall time, longest first, at most the count asked, a failed one marked', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-run-tests-'));
  try {
    const times = path.join(dir, 'times.tsv');
    const row = (wall: string, code: number, file: string) => `${wall}\t${code}\t1.0\t0.0\t${file}\n`;
    fs.writeFileSync(times, row('3.5', 0, '/t/b.test.ts') + row('12.0', 1, '/t/a.test.ts') + row('9.9', 0, '/t/c.test.ts'));
    const lines = (slowest(times, 2) as string).split('\n');
    assert.equal(lines[0], 'slowest 2 of 3 test files (wall, CPU own + children):');
    assert.equal(lines.length, 3);
    assert.match(lines[1]!, /^\s*12\.0 s .* !1 .*a\.test\.ts$/);
    assert.match(lines[2]!, /^\s*9\.9 s .*c\.test\.ts$/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
