/** `gemforge worker` as a child process (the media worker apart from the API, as deployed with WORKER_ENABLED=false). */
import { spawn } from 'node:child_process';
import path from 'node:path';

const BIN = path.resolve(import.meta.dirname, '../../scripts/gemforge.mjs');

/** Runs `gemforge worker` with `env` added to this process's; its output so far, its exit, and a stop (SIGTERM). */
export function workerChild(env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, 'worker'], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { stdout: () => stdout, stderr: () => stderr, exited, stop: () => child.kill('SIGTERM') };
}
