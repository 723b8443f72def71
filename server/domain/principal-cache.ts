/**
 * A short-lived cache of authenticated keys with their accounts, so most
 * requests skip the database lookup.
 *
 * The rule it keeps: a revocation, an expiry or an account block takes effect
 * within one second, also when another process (the admin CLI, a second
 * server) made it. So an entry is trusted for at most `PRINCIPAL_TTL_MS` after
 * it was read from the database, whoever changes the rows afterwards; expiry is
 * checked against the clock on every request from the cached row; and the
 * account-changing use cases of this process (accounts.ts) drop every entry at
 * once, so in-process changes apply to the very next request. Only keys that
 * exist are cached: an unknown key always asks the database, so a key created
 * elsewhere works immediately.
 */
import type { AccountRow, ApiKeyRow } from '../storage/accounts.ts';

/** How long a key read from the database is trusted (well inside the one-second rule). */
export const PRINCIPAL_TTL_MS = 500;
/** Bound on entries (distinct live keys seen within one TTL). */
const MAX_ENTRIES = 10_000;

interface Rows {
  key: ApiKeyRow;
  account: AccountRow;
}

interface Entry extends Rows {
  /** performance.now() when the read from the database began (monotonic: wall-clock jumps do not stretch it). */
  readAt: number;
  generation: number;
}

/** Bumped by every in-process change to keys or accounts; entries of an older generation are stale. */
let generation = 0;

/** Drops every cached principal in this process (after a revocation, block or other account change). */
export function invalidatePrincipals(): void {
  generation++;
}

export class PrincipalCache {
  private readonly entries = new Map<string, Entry>();
  private readonly reading = new Map<string, { rows: Promise<Rows | undefined>; generation: number }>();

  constructor(private readonly ttlMs = PRINCIPAL_TTL_MS) {}

  /**
   * The key and account for this secret hash: from the cache when read less
   * than the TTL ago, else from `read` (cached when the key exists). An entry's
   * age and generation are taken before the read starts, so a change that
   * commits while the read is in flight is never hidden for longer than the rule.
   */
  async lookup(secretHash: string, read: () => Promise<Rows | undefined>): Promise<Rows | undefined> {
    const entry = this.entries.get(secretHash);
    if (entry && entry.generation === generation && performance.now() - entry.readAt < this.ttlMs) return entry;
    if (entry) this.entries.delete(secretHash);
    // Requests that miss together share one read (no stampede of identical reads when an
    // entry ages out), unless this process changed keys or accounts since that read began.
    const pending = this.reading.get(secretHash);
    if (pending && pending.generation === generation) return pending.rows;
    const rows = this.read(secretHash, read);
    const mine = { rows, generation };
    this.reading.set(secretHash, mine);
    void rows.then(
      () => this.reading.get(secretHash) === mine && this.reading.delete(secretHash),
      () => this.reading.get(secretHash) === mine && this.reading.delete(secretHash),
    );
    return rows;
  }

  private async read(secretHash: string, read: () => Promise<Rows | undefined>): Promise<Rows | undefined> {
    const readAt = performance.now();
    const readGeneration = generation;
    const rows = await read();
    if (rows) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.clear(); // a flood of keys: start over rather than grow
      this.entries.set(secretHash, { ...rows, readAt, generation: readGeneration });
    }
    return rows;
  }
}
