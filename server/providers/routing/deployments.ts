/**
 * Several upstreams for one catalog model ("deployments"): the catalog entry's
 * `deployments:` list, each with its provider, upstream model, weight,
 * priority and key (or key pool), and the order a call tries them in.
 *
 * Requests spread by weight within the highest priority that has a deployment
 * whose breaker lets calls through; the others of that priority, then the
 * lower priorities, are the fallbacks, in the same manner. A deployment whose
 * breaker is open is not tried at all. docs/providers.md, "Several upstreams
 * per model", is the operator's description.
 */
import type { Config } from '../../config.ts';
import { Breaker, type BreakerState, type DeploymentStats } from './breaker.ts';
import { SharedBreakers } from './shared.ts';

/** One `deployments:` item as the catalog gives it, checked. */
export interface DeploymentEntry {
  /** Unique within the model (`<provider>-<n>` by default): names it in metrics, logs and the slot record. */
  id: string;
  provider: string;
  /** The upstream's base URL; absent: the provider's configured one. */
  url?: string;
  /** The upstream model; absent: the provider's configured mapping. */
  model?: string;
  /** Its key pool (values from UPSTREAM_KEYS), used in turn; empty: the provider's configured key. */
  keys: string[];
  weight: number;
  priority: number;
  /** The whole item, for a provider's own block (`replicate:`, `fal:`). */
  raw: Record<string, unknown>;
}

/** A deployment at run time: its providers (one per key), its breaker. */
export interface Deployment<P> {
  id: string;
  provider: string;
  priority: number;
  weight: number;
  breaker: Breaker;
  /** One provider per key of the pool. */
  pool: P[];
  /** The next key of the pool to use. */
  turn: number;
}

// Short enough that "<provider>@<id>" fits the slot record's provider column (64).
const ID = /^[A-Za-z0-9._-]{1,40}$/;

function whole(value: unknown, fallback: number, min: number, what: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 1_000_000)
    throw new Error(`${what} must be a whole number of at least ${min}`);
  return value;
}

function text(value: unknown, what: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) throw new Error(`${what} must be a non-empty string`);
  return value;
}

/**
 * The checked `deployments:` list of a catalog entry; undefined when it has
 * none. A bad item, an unknown key name or a duplicate id stops the start
 * naming the model. `keys` are the named keys of UPSTREAM_KEYS.
 */
export function parseDeployments(raw: unknown, keys: Record<string, string>, providers: readonly string[], where: string): DeploymentEntry[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw) || raw.length === 0) throw new Error(`${where}: deployments must be a non-empty list`);
  const seen = new Set<string>();
  return raw.map((item, i) => {
    const at = `${where}: deployments[${i}]`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new Error(`${at} must be an object`);
    const d = item as Record<string, unknown>;
    const provider = text(d.provider, `${at}.provider`);
    if (!provider || !providers.includes(provider)) throw new Error(`${at}.provider must be one of ${providers.join(', ')}`);
    const id = text(d.id, `${at}.id`) ?? `${provider}-${i + 1}`;
    if (!ID.test(id)) throw new Error(`${at}.id must be letters, digits, ".", "_" or "-"`);
    if (seen.has(id)) throw new Error(`${at}: duplicate id ${id}`);
    seen.add(id);
    if (d.key !== undefined && d.keys !== undefined) throw new Error(`${at}: give key or keys, not both`);
    const names = d.keys !== undefined ? d.keys : d.key !== undefined ? [d.key] : [];
    if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) throw new Error(`${at}.keys must be a list of names from UPSTREAM_KEYS`);
    const pool = (names as string[]).map((name) => {
      if (!Object.hasOwn(keys, name)) throw new Error(`${at}: key ${name} is not named in UPSTREAM_KEYS`);
      return keys[name];
    });
    const entry: DeploymentEntry = {
      id,
      provider,
      keys: pool,
      weight: whole(d.weight, 1, 1, `${at}.weight`),
      priority: whole(d.priority, 0, 0, `${at}.priority`),
      raw: d,
    };
    const url = text(d.url, `${at}.url`);
    if (url !== undefined) entry.url = url;
    const model = text(d.model, `${at}.model`);
    if (model !== undefined) entry.model = model;
    return entry;
  });
}

/** The breaker settings of a deployment (BREAKER_FAILURES, BREAKER_COOLDOWN_SECONDS). */
export function breakerOf(config: Pick<Config, 'breakerFailures' | 'breakerCooldownSeconds'>, now?: () => number): Breaker {
  return new Breaker({ failures: config.breakerFailures, cooldownMs: config.breakerCooldownSeconds * 1000, ...(now && { now }) });
}

/** Builds a model's deployments: `make(entry, key)` is one provider for one key of its pool (undefined: the configured key). */
export function deploymentsOf<P>(
  entries: DeploymentEntry[],
  make: (entry: DeploymentEntry, key: string | undefined) => P,
  breaker: () => Breaker,
): Array<Deployment<P>> {
  return entries.map((e) => ({
    id: e.id,
    provider: e.provider,
    priority: e.priority,
    weight: e.weight,
    breaker: breaker(),
    pool: e.keys.length > 0 ? e.keys.map((k) => make(e, k)) : [make(e, undefined)],
    turn: 0,
  }));
}

/** The pool's next provider (keys used in turn). */
export function nextOf<P>(deployment: Deployment<P>): P {
  const provider = deployment.pool[deployment.turn % deployment.pool.length];
  deployment.turn = (deployment.turn + 1) % deployment.pool.length;
  return provider;
}

/** `list` in a weighted random order: each next one drawn with a chance proportional to its weight. */
function weightedShuffle<P>(list: Array<Deployment<P>>, random: () => number): Array<Deployment<P>> {
  const left = [...list];
  const out: Array<Deployment<P>> = [];
  while (left.length > 0) {
    const total = left.reduce((sum, d) => sum + d.weight, 0);
    let draw = random() * total;
    let i = 0;
    while (i < left.length - 1 && draw >= left[i].weight) draw -= left[i++].weight;
    out.push(...left.splice(i, 1));
  }
  return out;
}

/**
 * The order one call tries the deployments in: the highest priority first,
 * each priority's deployments in a weighted random order; deployments whose
 * breaker lets nothing through are left out.
 */
export function tryOrder<P>(deployments: Array<Deployment<P>>, random: () => number = Math.random): Array<Deployment<P>> {
  const priorities = [...new Set(deployments.map((d) => d.priority))].sort((a, b) => b - a);
  return priorities.flatMap((p) =>
    weightedShuffle(
      deployments.filter((d) => d.priority === p && d.breaker.available()),
      random,
    ),
  );
}

/** Whether any deployment would take a call now (the submission's pre-flight). */
export function anyAvailable<P>(deployments: Array<Deployment<P>>): boolean {
  return deployments.some((d) => d.breaker.available());
}

/** Seconds until the first open breaker lets a probe through (1 at least): the 503's Retry-After. */
export function retryAfterSecondsOf<P>(deployments: Array<Deployment<P>>): number {
  const ms = Math.min(...deployments.map((d) => d.breaker.retryInMs()));
  return Math.min(3600, Math.max(1, Math.ceil(ms / 1000)));
}

/** One deployment as /metrics and `gemforge admin providers` show it. */
export interface DeploymentView {
  model: string;
  deployment: string;
  provider: string;
  priority: number;
  weight: number;
  /** As every process sharing the breakers sees it (open while any of them holds it open). */
  state: BreakerState;
  /** Until when some process holds it open, as the shared state last read says (absent: none). */
  sharedOpenUntil?: string;
  stats: DeploymentStats;
}

/**
 * The deployments of every routed model of one app (or one `gemforge worker`),
 * with their breakers' shared state: built by the composition root and handed
 * to the providers it builds (which register here), to the breaker sharing
 * (server.ts `shareBreakerState`) and to /metrics, which reads `views()`.
 */
export class Deployments {
  /** The breakers' state shared with other processes (shared.ts). */
  readonly shared = new SharedBreakers();
  private readonly routed = new Map<string, Array<Deployment<unknown>>>();

  /** Registers a model's deployments (a later registration of the same model replaces it). */
  register<P>(model: string, deployments: Array<Deployment<P>>): void {
    this.routed.set(model, deployments);
    // Each breaker joins the state shared between processes (shared.ts), read and written once sharing starts.
    for (const d of deployments) d.breaker.sharing = this.shared.sharingOf(model, d.id);
  }

  /** Every registered deployment, as shown to operators. */
  views(): DeploymentView[] {
    return [...this.routed].flatMap(([model, list]) =>
      list.map((d) => {
        const until = d.breaker.sharing?.openUntil();
        return {
          model,
          deployment: d.id,
          provider: d.provider,
          priority: d.priority,
          weight: d.weight,
          state: d.breaker.sharedState(),
          ...(until !== undefined && { sharedOpenUntil: new Date(until).toISOString() }),
          stats: { ...d.breaker.stats },
        };
      }),
    );
  }
}
