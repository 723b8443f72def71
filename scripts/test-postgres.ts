/**
 * `npm run test:postgres [-- test files…]`: the test suite against Postgres.
 * TEST_DATABASE_URL names a database its role can connect to and CREATE DATABASE
 * from; every test installation gets a fresh database of its own
 * (test/helpers/database.ts), and the databases this run leaves behind are
 * dropped at the end. Without file arguments it runs every test file.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

function allTestFiles(): string[] {
  return ['test', 'test/unit'].flatMap((dir) =>
    fs
      .readdirSync(path.join(ROOT, dir))
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => `${dir}/${f}`),
  );
}

async function main(): Promise<number> {
  if (!process.env.TEST_DATABASE_URL) {
    console.error('test:postgres: set TEST_DATABASE_URL=postgres://user:password@host:port/database (the role needs CREATEDB)');
    return 2;
  }
  const prefix = `gft_${crypto.randomBytes(3).toString('hex')}_`;
  process.env.TEST_DB_PREFIX = prefix;
  // Imported after TEST_DB_PREFIX is set: the helper reads it once.
  const { dropDatabasesWithPrefix } = await import('../test/helpers/database.ts');
  const files = process.argv.slice(2);
  const args = ['--import', 'tsx', '--test', '--test-concurrency=2', ...(files.length ? files : allTestFiles())];
  process.on('SIGINT', () => {}); // Ctrl-C stops the tests (same process group); this runner still cleans up
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, DATABASE_URL: '' } });
  const code = await new Promise<number>((resolve) =>
    child.once('exit', (c, signal) => {
      if (signal) console.error(`test:postgres: the test runner ended on ${signal}`);
      resolve(c ?? 1);
    }),
  );
  const left = await dropDatabasesWithPrefix(prefix);
  if (left.length) console.error(`test:postgres: dropped ${left.length} test database(s) left by this run`);
  return code;
}

process.exitCode = await main();
