/**
 * What a remote provider is, in one place: a descriptor its own module exports
 * and `index.ts` registers once. It declares the provider's name (the
 * catalog's `provider:`), the kinds of media it makes, its wire dialect, the
 * request fields a catalog mapping may name, how each outcome of its creating
 * call is treated (its failure mapping and replay rule) and how one catalog
 * model is built on it. The registry, the catalog's known names, the start
 * checks and the conformance suite (test/provider-conformance.test.ts) all read
 * it; nothing else names a provider. A model may later map to several
 * upstreams (fallback, breakers): each upstream is one `create` of a
 * descriptor, so such a layer composes providers, it does not reach inside one.
 */
import type { Config } from '../../config.ts';
import type { Catalog, CatalogModel } from '../../domain/catalog.ts';
import type { MediaKind, MediaProvider } from '../media-types.ts';
import type { FetchAllow } from './public-fetch.ts';
import type { ReadLimits } from './read-limit.ts';

/** The settings every remote provider shares (REMOTE_* variables). */
export interface CommonRemoteOptions {
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  /** Private addresses an output URL may point at (`REMOTE_FETCH_ALLOW`). */
  fetchAllow: FetchAllow;
  /** The buckets upstream reads take their turn from (read-limit.ts): the process's, given by the composition root. */
  readLimits: ReadLimits;
}

/** What building one catalog model's provider may read. */
export interface ProviderContext {
  config: Config;
  catalog: Catalog;
  common: CommonRemoteOptions;
  /** "catalog model <id>", for start errors. */
  where: string;
}

/**
 * How the outcomes of a provider's creating call are treated (http.ts applies
 * it; docs/providers.md tabulates it per provider):
 * - `notDone`: answers documented as "not processed", sent again;
 * - any other 4xx: refused, the slot fails and its Gems are released;
 * - any other 5xx, a timeout or a reset after sending: unknown, handled by `unknown`.
 */
export interface FailureRules {
  notDone: readonly number[];
  /**
   * An unknown outcome of a creating call: `lookup` (the job is read by the id
   * its answer carried, else the task is held), `key` (sent again with the same
   * idempotency key where the operator declared the upstream honours it, else held).
   */
  unknown: 'lookup' | 'key';
  /** Reads (polls, downloads) are always sent again: they do no work. */
  reads: 'resent';
}

/** Answers documented as "not processed" by the HTTP APIs here: 408 (not received whole), 429 (throttled), 503 (overloaded). */
export const NOT_PROCESSED: readonly number[] = [408, 429, 503];

/** What one deployment of a model (server/providers/routing) sets for its provider; absent, the configured value. */
export interface DeploymentSettings {
  url?: string | undefined;
  key?: string | undefined;
  /** The upstream model (a mapping provider takes it from its own block instead). */
  model?: string | undefined;
  /** The deployment's block named after the provider (`replicate:`, `fal:`). */
  entry?: unknown;
}

export interface RemoteProviderDescriptor {
  /** The catalog's `provider:` value. */
  readonly name: string;
  /** The kinds of media it makes; a model of another kind naming it stops the start. */
  readonly kinds: readonly MediaKind[];
  /** The wire dialect it speaks (for docs and errors). */
  readonly dialect: string;
  /** Fields of the job request a catalog mapping may name, per kind (mapping providers only). */
  readonly requestFields?: Partial<Record<MediaKind, readonly string[]>>;
  readonly failures: FailureRules;
  /** The environment mappings listing catalog ids (`IMAGE_UPSTREAM_MODELS`): each id must be in the catalog. */
  mappings?(config: Config): Array<[variable: string, mapping: Record<string, string>]>;
  /** Whether a model that names no provider uses this one (listed in one of its mappings). */
  claims?(model: CatalogModel, config: Config): boolean;
  /** Whether a model of this kind can be made (speech only for a speech provider); its reason otherwise. */
  accepts?(model: CatalogModel): string | undefined;
  /**
   * The settings one deployment of a model runs with (its URL, key, upstream
   * model or own block written over the configured ones), handed to `create`:
   * absent, the provider cannot be a deployment.
   */
  deployment?(model: CatalogModel, config: Config, settings: DeploymentSettings): { model: CatalogModel; config: Config };
  /** The provider of one catalog model; throws naming `context.where` when its settings or mapping are wrong. */
  create(model: CatalogModel, context: ProviderContext): MediaProvider;
}
