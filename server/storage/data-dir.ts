/**
 * DATA_DIR holds the database (with the URL-signing keys, password hashes and
 * key hashes), every blob and every temp file: none of it is for other users
 * of the machine. The process creates what it writes for its own user only
 * (umask 077, as PostgreSQL does: directories 0700, files 0600, whoever writes
 * them — SQLite, sharp, ffmpeg, our own streams); the database file is made
 * 0600 before SQLite opens it, since SQLite gives its -wal and -shm files the
 * database file's mode. A directory that already exists keeps its mode (it
 * may be a mount an operator set up): a wider one is reported at start.
 * See docs/operations.md "Data at rest".
 */
import fs from 'node:fs';

/** Bits that let users other than the owner in. */
const OTHERS = 0o077;

/** Makes everything this process creates from now on private to its user, and DATA_DIR exist (0700 when new). */
export function privateDataDir(dataDir: string): void {
  process.umask(OTHERS);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
}

/** Makes the SQLite file and its companions private before SQLite opens them (new ones are created 0600). */
export function privateSqliteFiles(file: string): void {
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      fs.chmodSync(f, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/** The directory's mode when it lets other users in (for a warning at start), else undefined. */
export function widerThanPrivate(dataDir: string): string | undefined {
  const mode = fs.statSync(dataDir).mode & 0o777;
  return mode & OTHERS ? mode.toString(8).padStart(4, '0') : undefined;
}
