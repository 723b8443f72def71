/** `gemforge admin …` as a separate process on a server's data dir (as an operator runs it). */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { dbEnvFor } from './database.ts';

const bin = path.resolve(import.meta.dirname, '../../scripts/gemforge.mjs');

/** Runs `gemforge admin …` without blocking the test process (the server keeps answering meanwhile); `stdin` is written to its input. */
async function run(
  dataDir: string,
  args: string[],
  stdin?: string,
  extra: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, ...extra, ...(await dbEnvFor(dataDir)) };
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, 'admin', ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
    });
    child.stdin?.end(stdin ?? '');
  });
}

function withJson(r: { code: number; stdout: string; stderr: string }): { code: number; json: any; stderr: string } {
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { code: r.code, json, stderr: r.stderr };
}

/** Runs `gemforge admin …` and parses its JSON output. */
export async function admin(dataDir: string, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  return withJson(await run(dataDir, args));
}

/** Runs `gemforge admin …` with more environment (the server's CATALOG_PATH, UPSTREAM_KEYS …) and parses its JSON output. */
export async function adminWithEnv(dataDir: string, env: Record<string, string>, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  return withJson(await run(dataDir, args, undefined, env));
}

/** Runs `gemforge admin …` with `stdin` as its input (a password) and parses its JSON output. */
export async function adminWithInput(dataDir: string, stdin: string, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  return withJson(await run(dataDir, args, stdin));
}

/** Runs `gemforge admin …` and returns its raw output (help text, messages). */
export async function adminText(dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(dataDir, args);
}
