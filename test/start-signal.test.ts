/**
 * `npm start` as operators run it: a SIGTERM sent to the npm
 * process reaches the server (the start script `exec`s node, so no shell sits
 * between them), which drains and exits — it used to leave the server orphaned
 * and still listening.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tempDataDir } from './helpers/server.ts';
import { freePort } from './helpers/ports.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

async function answers(url: string): Promise<boolean> {
  try {
    await (await fetch(url)).arrayBuffer();
    return true;
  } catch {
    return false;
  }
}

describe('npm start and SIGTERM', () => {
  it('when SIGTERM is sent to the npm start process, then the server drains and stops listening', async () => {
    const dir = tempDataDir();
    const port = await freePort();
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    npm.stdout.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | NodeJS.Signals | null>((resolve) => npm.once('exit', (code, signal) => resolve(signal ?? code)));
    const url = `http://127.0.0.1:${port}/healthz`;
    try {
      const end = Date.now() + 60_000;
      while (!(await answers(url))) {
        if (Date.now() > end) throw new Error(`npm start did not serve: ${log}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      npm.kill('SIGTERM');
      const stop = Date.now() + 15_000;
      while (await answers(url)) {
        if (Date.now() > stop) throw new Error('the server still listens 15 s after npm got SIGTERM (orphaned)');
        await new Promise((r) => setTimeout(r, 100));
      }
      await exited;
      assert.match(log, /shutting down: finishing in-flight requests/);
      assert.match(log, /"msg":"stopped"/);
    } finally {
      npm.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
