/**
 * WAL checkpoints off the write path. SQLite's automatic checkpoint
 * runs inside the COMMIT that grows the WAL past its limit: that commit copies
 * every page written since the last one into the database file and syncs both
 * files, while every other transaction of the process queues behind its
 * connection. Measured at 32 concurrent image submissions, those stalls made the
 * slowest percent of answers two to three times slower than the rest.
 *
 * So each process that opens the database keeps a connection of its own that
 * runs a PASSIVE checkpoint every `CHECKPOINT_EVERY_MS` (it neither takes the
 * write lock nor waits for readers: the writer goes on meanwhile), and the
 * writing connection's automatic checkpoint stays only as a bound, at
 * `WRITER_AUTOCHECKPOINT_PAGES`, should the checkpoints ever fall behind. The
 * last connection to close checkpoints everything, as before.
 */
import sqlite3 from 'sqlite3';
import { closeConnection, openConnection } from './sqlite-connection.ts';

/** How often the checkpoint connection copies the WAL's pages into the database. */
export const CHECKPOINT_EVERY_MS = 200;
/** The writing connection's own automatic checkpoint: a bound (about 40 MB of WAL), not the rule. */
export const WRITER_AUTOCHECKPOINT_PAGES = 10_000;

export class Checkpointer {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> | undefined;
  private closed = false;

  private constructor(private readonly conn: sqlite3.Database) {
    this.timer = setInterval(() => void this.checkpoint(), CHECKPOINT_EVERY_MS);
    this.timer.unref(); // never what keeps a process alive
  }

  /** Opens a connection to `file` (the schema must exist) and starts checkpointing. */
  static async open(file: string): Promise<Checkpointer> {
    return new Checkpointer(await openConnection(file, sqlite3.OPEN_READWRITE));
  }

  /** One PASSIVE checkpoint (none while the last is still running); failures are left for the next one. */
  checkpoint(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.running ??= new Promise<void>((resolve) => this.conn.all('PRAGMA wal_checkpoint(PASSIVE)', () => resolve())).finally(() => (this.running = undefined));
    return this.running;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.running;
    await closeConnection(this.conn);
  }
}
