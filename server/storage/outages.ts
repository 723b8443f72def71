/**
 * Failures of the stores gemforge depends on (the database, the blob store —
 * object storage or the local disk), told apart from failures of the work
 * itself: a worker that cannot store an output leaves the job for a later
 * attempt instead of failing the slot (docs/operations.md, "Outages"). Each
 * failure is counted by store and operation for /metrics.
 */

/** Which store failed, as logs and metrics name it. */
export type StoreName = 'database' | 'object store' | 'local disk';

/** A store could not be read or written; the work that needed it may be tried again later. */
export class StoreUnavailableError extends Error {
  constructor(
    readonly store: StoreName,
    readonly operation: string,
    override readonly cause: unknown,
  ) {
    super(`the ${store} failed (${operation}): ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'StoreUnavailableError';
  }
}

/** Error codes of a local file system that cannot take writes now (full, read-only, failing, out of handles). */
const DISK_CODES = new Set(['ENOSPC', 'EDQUOT', 'EIO', 'EROFS', 'EMFILE', 'ENFILE']);

/** True for an error of the local disk itself (not of the bytes or of the caller). */
export function isDiskFailure(error: unknown): boolean {
  return DISK_CODES.has((error as NodeJS.ErrnoException)?.code ?? '');
}

/** Store errors by "store\toperation" since the process started, for /metrics. */
export const storeErrorCounts = new Map<string, number>();

/** Errors already counted, so one failure passing up through several layers is counted once, where it happened. */
const counted = new WeakSet<object>();

/** Counts one failure of `store` in `operation` (once per error object). */
export function countStoreError(store: StoreName, operation: string, error?: unknown): void {
  if (error !== null && typeof error === 'object') {
    if (counted.has(error)) return;
    counted.add(error);
  }
  const key = `${store}\t${operation}`;
  storeErrorCounts.set(key, (storeErrorCounts.get(key) ?? 0) + 1);
}

/** Counts the failure and wraps it (an error already wrapped is passed on as it is). */
export function storeFailed(store: StoreName, operation: string, error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  countStoreError(store, operation, error);
  return new StoreUnavailableError(store, operation, error);
}

/** Connection-level error codes of a database client (refused, reset, timed out, name lookup). */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * True for an error that says the database could not be reached or is not
 * taking work (not that a statement was wrong): knex's pool timing out, a
 * dropped or refused connection, Postgres shutting down or out of connections
 * (SQLSTATE classes 08, 53, 57P), SQLite busy, full or failing on its disk.
 */
export function isDatabaseFailure(error: unknown): boolean {
  const e = error as { name?: string; code?: string; message?: string } | undefined;
  if (!e) return false;
  if (e.name === 'KnexTimeoutError') return true;
  const code = e.code ?? '';
  if (NETWORK_CODES.has(code) || DISK_CODES.has(code)) return true;
  if (/^(08|53)/.test(code) || /^57P0[1-3]$/.test(code)) return true;
  if (/^SQLITE_(BUSY|FULL|IOERR|CANTOPEN|READONLY|LOCKED)/.test(code)) return true;
  return /Connection terminated|connection error|Timeout acquiring a connection/i.test(e.message ?? '');
}
