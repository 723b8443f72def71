/**
 * Breaker state shared between processes. Breakers count failures where the
 * calls are made (an API for text, a worker for media), but the API decides
 * at submission whether a media model can be served at all: with the worker a
 * process of its own, only a shared record lets the API refuse work that every
 * deployment would turn away. The record is one opened-until moment per
 * deployment (the database's `upstream_breakers`), written when a breaker opens
 * or closes and read by every process every second or so into a cache that
 * `admit` reads synchronously. The composition root builds the cache with the
 * app's deployments and starts the sharing with a store (server.ts
 * `shareBreakerState`); without it (unit tests, a process with no database)
 * breakers are the app's own, as they were.
 */
import type { BreakerSharing } from './breaker.ts';

/** Where the shared state is kept (storage/breakers.ts over the database). */
export interface SharedBreakerStore {
  /** Every deployment some process holds open now: its opened-until moment (ms since the epoch). */
  readOpen(): Promise<Array<{ model: string; deployment: string; openedUntil: number }>>;
  /** Records that a deployment's breaker opened until `openedUntil`, or closed (null). */
  write(model: string, deployment: string, openedUntil: number | null): Promise<void>;
}

/** How old the cache `admit` reads may grow: another process's breaker is seen within about this long. */
export const SHARED_BREAKER_REFRESH_MS = 1000;

const key = (model: string, deployment: string) => `${model}\t${deployment}`;

/**
 * One app's (or worker's) copy of the shared breaker state, built by the
 * composition root with its deployments (deployments.ts `Deployments`): two
 * apps in one process each read the database into their own copy.
 */
export class SharedBreakers {
  /** Opened-until moments by deployment, as last read (and as this copy last wrote them). */
  private readonly openUntil = new Map<string, number>();
  /** The deployments registered here: without any, nothing is read. */
  private readonly registered = new Set<string>();
  private store: SharedBreakerStore | undefined;
  private report: (error: unknown, what: 'read' | 'write') => void = () => undefined;
  // Bumped by every write: a read that began before a write does not undo what the write set.
  private writes = 0;

  /** The sharing of one deployment's breaker (deployments.ts sets it at registration). */
  sharingOf(model: string, deployment: string): BreakerSharing {
    const k = key(model, deployment);
    this.registered.add(k);
    const remaining = () => Math.max(0, (this.openUntil.get(k) ?? 0) - Date.now());
    return {
      openForMs: remaining,
      openUntil: () => (remaining() > 0 ? this.openUntil.get(k) : undefined),
      changed: (until) => {
        this.writes++;
        if (until === null) this.openUntil.delete(k);
        else this.openUntil.set(k, until);
        // Best effort: with the database down the record ages out by itself (an open one at its moment).
        this.store?.write(model, deployment, until).catch((error: unknown) => this.report(error, 'write'));
      },
    };
  }

  private async refresh(from: SharedBreakerStore): Promise<void> {
    if (this.registered.size === 0) return;
    const before = this.writes;
    const rows = await from.readOpen();
    if (from !== this.store || this.writes !== before) return;
    this.openUntil.clear();
    for (const row of rows) this.openUntil.set(key(row.model, row.deployment), row.openedUntil);
  }

  /**
   * Starts sharing these breakers through `shared`: read at once, then every
   * `refreshMs`. A read that fails keeps the last state (logged through
   * `onError`). Returns the stop (a later start replaces an earlier one).
   */
  share(
    shared: SharedBreakerStore,
    options: { refreshMs?: number; onError?: (error: unknown, what: 'read' | 'write') => void } = {},
  ): { ready: Promise<void>; stop(): void } {
    this.store = shared;
    this.report = options.onError ?? (() => undefined);
    const tick = () => this.refresh(shared).catch((error: unknown) => this.report(error, 'read'));
    const timer = setInterval(() => void tick(), options.refreshMs ?? SHARED_BREAKER_REFRESH_MS); // tick catches its own failure
    timer.unref();
    return {
      ready: tick(),
      stop: () => {
        clearInterval(timer);
        if (this.store !== shared) return;
        this.store = undefined;
        this.openUntil.clear();
      },
    };
  }
}
