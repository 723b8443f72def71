/**
 * Where a running server is reached, recorded for the admin CLI: `admin console
 * invite` prints a link to the console, and without `--base-url` it must point
 * at the server that actually runs, not at a guessed `localhost:8080`.
 *
 * At listen the server writes `server-url.json` in DATA_DIR (PUBLIC_BASE_URL when
 * set, else the address it listens on); at close it removes the file if it is
 * still its own (another instance on the same DATA_DIR may have written it
 * since). A file left by a killed server is replaced at the next start. Why a
 * file and not a database row: see docs/console.md (Invite links).
 */
import fs from 'node:fs';
import path from 'node:path';
import { writeWhole } from './write-whole.ts';

const FILE = 'server-url.json';

interface Record_ {
  url: string;
  pid: number;
  startedAt: string;
}

/** The base URL of a listener: a wildcard bind (0.0.0.0, ::) is reached as localhost on this machine. */
export function listenBaseUrl(host: string, port: number): string {
  const name = host === '0.0.0.0' || host === '::' || host === '' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}

/** Writes the record (atomically: a reader never sees half a file); returns the remover for close. */
export function recordServerUrl(dataDir: string, url: string, now: Date): { remove(): void } {
  const file = path.join(dataDir, FILE);
  const record: Record_ = { url, pid: process.pid, startedAt: now.toISOString() };
  const text = `${JSON.stringify(record)}\n`;
  writeWhole(file, text, { mode: 0o600 }); // like the rest of DATA_DIR: its user only
  return {
    remove() {
      try {
        if (fs.readFileSync(file, 'utf8') === text) fs.rmSync(file, { force: true });
      } catch {
        // already gone, or unreadable: nothing of ours to remove
      }
    },
  };
}

/** The base URL the running server recorded in `dataDir`, if any. */
export function recordedServerUrl(dataDir: string): string | undefined {
  try {
    const record = JSON.parse(fs.readFileSync(path.join(dataDir, FILE), 'utf8')) as Partial<Record_>;
    return typeof record.url === 'string' && /^https?:\/\/\S+$/.test(record.url) ? record.url : undefined;
  } catch {
    return undefined;
  }
}
