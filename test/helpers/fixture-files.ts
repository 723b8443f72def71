/**
 * Fixture files made once per test process: `memo(name, make)` makes `name` in a
 * temp directory of this process the first time it is asked for (concurrent asks
 * share the one making) and removes the directory when the process exits; and
 * the project's own ffmpeg, quiet and without stdin (helpers/media.ts, helpers/videos.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundledFfmpegPath } from '../../server/media/binaries.ts';
import { runTool } from '../../server/media/run.ts';

export const FFMPEG = bundledFfmpegPath();

export function fixtureFiles(prefix: string): { memo(name: string, make: (file: string) => Promise<void>): Promise<string> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const made = new Map<string, Promise<string>>();
  return {
    memo(name, make) {
      let p = made.get(name);
      if (!p) {
        const file = path.join(dir, name);
        p = make(file).then(() => file);
        made.set(name, p);
      }
      return p;
    },
  };
}

/** Runs the bundled ffmpeg with `args` (quiet, no stdin, overwriting), within `timeoutMs`. */
export const ffmpegWith = (timeoutMs: number) => (args: string[]) => runTool(FFMPEG, ['-v', 'error', '-nostdin', '-y', ...args], { timeoutMs });
