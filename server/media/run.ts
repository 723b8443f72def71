/** Runs a media binary (ffprobe, ffmpeg) with a time limit and bounded output capture. */
import { spawn } from 'node:child_process';

export class ToolError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'ToolError';
  }
}

export interface RunOptions {
  timeoutMs?: number;
  /** Stop (and fail) when stdout grows beyond this many bytes. */
  maxStdoutBytes?: number;
}

/** Runs `bin args…` and resolves with its stdout; rejects with ToolError on a non-zero exit, a timeout or too much output. */
export function runTool(bin: string, args: string[], options: RunOptions = {}): Promise<Buffer> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxStdout = options.maxStdoutBytes ?? 16 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failure: string | undefined;
    const timer = setTimeout(() => {
      failure = `timed out after ${timeoutMs} ms`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > maxStdout) {
        failure ??= `produced more than ${maxStdout} bytes`;
        child.kill('SIGKILL');
        return;
      }
      out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (err.length < 8192) err += chunk.toString('utf8');
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new ToolError(`${bin} could not start: ${error.message}`, err));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      if (failure) reject(new ToolError(`${bin} ${failure}`, err));
      else if (code !== 0) reject(new ToolError(`${bin} exited with code ${code}`, err));
      else resolve(Buffer.concat(out));
    });
  });
}
