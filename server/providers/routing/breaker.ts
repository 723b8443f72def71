/**
 * A circuit breaker for one upstream deployment, and what it counts.
 *
 * - `closed`: calls pass; `failures` consecutive failures open it.
 * - `open`: no call passes until `cooldownMs` has gone by since it opened.
 * - `half-open`: one call (the probe) passes; its success closes the breaker,
 *   its failure opens it again for another cooldown. While the probe runs,
 *   nothing else passes.
 *
 * A "failure" is an attempt the upstream did not serve (refused connection,
 * throttled, a credentials refusal, a 5xx, a timeout): a refusal of the
 * request itself (a content policy, a bad field) says nothing about the
 * deployment's health and is counted as a success here.
 *
 * Other processes (an API and a separate `gemforge worker`) learn of an open
 * breaker through the database (`shared`, deployments.ts): a deployment that
 * another process holds open lets no call pass here either until its
 * opened-until moment, and this breaker tells them when it opens or closes.
 */

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  failures: number;
  /** How long it stays open before a probe is let through. */
  cooldownMs: number;
  /** The clock (injectable for tests). */
  now?: () => number;
}

/** Per-deployment counts, for /metrics and `gemforge admin providers`. */
export interface DeploymentStats {
  calls: number;
  errors: number;
  /** Sum of the attempts' durations, in seconds (with `calls`, the mean latency). */
  latencySeconds: number;
}

/** How a breaker joins the state other processes share (set when its model's deployments are registered). */
export interface BreakerSharing {
  /** Milliseconds another process (or this one) still holds this deployment open (0: none). */
  openForMs(): number;
  /** The shared opened-until moment still to come (ms since the epoch), if any. */
  openUntil(): number | undefined;
  /** This breaker opened until that moment (ms since the epoch), or closed (null). */
  changed(openedUntil: number | null): void;
}

export class Breaker {
  private consecutive = 0;
  private openedAt = 0;
  private opened = false;
  private probing = false;
  readonly stats: DeploymentStats = { calls: 0, errors: 0, latencySeconds: 0 };
  private readonly now: () => number;
  /** The state shared with other processes, once registered. */
  sharing?: BreakerSharing;

  constructor(private readonly options: BreakerOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The state as of now (an open breaker past its cooldown reads half-open). */
  state(): BreakerState {
    if (!this.opened) return 'closed';
    return this.now() - this.openedAt >= this.options.cooldownMs ? 'half-open' : 'open';
  }

  /** The state as every process sharing it sees it: open while any of them holds it open. */
  sharedState(): BreakerState {
    return (this.sharing?.openForMs() ?? 0) > 0 ? 'open' : this.state();
  }

  /** Whether a call could pass now, without taking the probe (the submission's pre-flight). */
  available(): boolean {
    const state = this.sharedState();
    return state === 'closed' || (state === 'half-open' && !this.probing);
  }

  /** Takes the right to call: false when open (here or in another process), or half-open with its probe already out. */
  acquire(): boolean {
    const state = this.sharedState();
    if (state === 'closed') return true;
    if (state === 'open' || this.probing) return false;
    this.probing = true;
    return true;
  }

  /** Milliseconds until an open breaker (here or in another process) lets a probe through (0 when not open). */
  retryInMs(): number {
    const here = this.state() === 'open' ? Math.max(0, this.options.cooldownMs - (this.now() - this.openedAt)) : 0;
    return Math.max(here, this.sharing?.openForMs() ?? 0);
  }

  /** The attempt was served (or refused on its own merits). */
  success(seconds: number): void {
    this.stats.calls++;
    this.stats.latencySeconds += seconds;
    this.consecutive = 0;
    // Only a change is told: a closed breaker's successes write nothing.
    if (this.opened) this.sharing?.changed(null);
    this.opened = false;
    this.probing = false;
  }

  /** The attempt was not served. */
  failure(seconds: number): void {
    this.stats.calls++;
    this.stats.errors++;
    this.stats.latencySeconds += seconds;
    this.consecutive++;
    if (this.probing || this.consecutive >= this.options.failures) {
      this.opened = true;
      this.openedAt = this.now();
      this.sharing?.changed(this.openedAt + this.options.cooldownMs);
    }
    this.probing = false;
  }

  /** An attempt that ended without a verdict on the deployment (the worker stopped): the probe is given back. */
  release(): void {
    this.probing = false;
  }
}
