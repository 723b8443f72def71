/** `gemforge admin …` as a separate process on a server's data dir (as an operator runs it). */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { dbEnvFor } from './database.ts';

const bin = path.resolve(import.meta.dirname, '../../scripts/gemforge.mjs');

/** Runs `gemforge admin …` without blocking the test process (the server keeps answering meanwhile). */
export async function admin(dataDir: string, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  const env = { ...process.env, ...(await dbEnvFor(dataDir)) };
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'admin', ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, json, stderr });
    });
  });
}

/** Runs `gemforge admin …` and returns its raw output (help text, messages). */
export async function adminText(dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, ...(await dbEnvFor(dataDir)) };
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, 'admin', ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
    });
  });
}
