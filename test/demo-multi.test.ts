/**
 * The one-command multi-instance demo: `scripts/demo-multi.sh
 * --check` starts Postgres, an S3 server, two APIs behind nginx and two workers,
 * runs its smoke check through nginx (a task made, polled and downloaded, an
 * upload referenced, both APIs seen), stops everything and exits 0. Skipped
 * where nginx or Postgres are missing and cannot be installed (not root), and in
 * the Postgres suite (the demo brings its own cluster: once per CI run is enough).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { freePort } from './helpers/ports.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

function installed(): boolean {
  const nginx = spawnSync('sh', ['-c', 'command -v nginx || test -x /usr/sbin/nginx']).status === 0;
  const postgres =
    fs.existsSync('/usr/lib/postgresql') && fs.readdirSync('/usr/lib/postgresql').some((v) => fs.existsSync(`/usr/lib/postgresql/${v}/bin/initdb`));
  return nginx && postgres;
}

function skipReason(): string | false {
  if (TEST_DATABASE_URL) return 'the demo starts its own Postgres: it runs once, in npm test';
  if (!installed() && process.getuid?.() !== 0) return "needs nginx and postgresql from Debian's packages: not installed, and not root to install them";
  return false;
}

describe('the multi-instance demo', () => {
  it(
    'when the demo runs with --check, then its smoke check passes through nginx across both APIs and it stops everything',
    { skip: skipReason(), timeout: 300_000 },
    async () => {
      const port = await freePort();
      const demo = spawn('bash', ['scripts/demo-multi.sh', '--check'], {
        cwd: ROOT,
        env: { ...process.env, DEMO_PORT: String(port), LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      demo.stdout.on('data', (d: Buffer) => (out += d.toString()));
      demo.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((resolve) => demo.once('exit', (c) => resolve(c)));
      assert.equal(code, 0, out);
      assert.match(out, /ok {3}both APIs answered/);
      assert.match(out, /demo check: passed/);
      const listening = await new Promise<boolean>((resolve) =>
        net
          .connect(port, '127.0.0.1')
          .once('connect', () => resolve(true))
          .once('error', () => resolve(false)),
      );
      assert.equal(listening, false, 'nginx was stopped');
    },
  );
});
