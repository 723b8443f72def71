/**
 * The model catalog: a YAML file a person can edit (server/catalog/models.yaml).
 * Discovery lists its public part; the private rate card stays on the server.
 */
import { readYamlFile } from '../yaml-file.ts';
import type { components } from '../../generated/api.ts';
import { parseEntry, parseRates, type Entry } from './catalog-entries.ts';
import type { TokenRates } from './spend.ts';

export type PublicModel = components['schemas']['Model'];
export type ModelKind = PublicModel['kind'];

/**
 * A catalog entry: the public model plus its private rate card, with capabilities
 * and pricing typed per kind (catalog-entries.ts). `listedCapabilities` is what
 * discovery shows: the file's own object.
 */
export type CatalogModel = Entry & {
  id: string;
  name: string;
  available?: boolean;
  baseGems?: number;
  listedCapabilities: Record<string, unknown>;
  /** The provider that makes its outputs (`local` when absent; server/providers/remote). */
  provider?: string;
  /**
   * The block named after its provider (`replicate:` for provider replicate,
   * `fal:` for fal): the provider's own mapping, checked when providers are built.
   */
  providerEntry?: unknown;
  /**
   * The entry's `deployments:` list (several upstreams for the model), as the
   * file gives it: checked when providers are built (server/providers/routing).
   */
  deploymentsEntry?: unknown;
};

/** The entry of one kind. */
export type ModelOf<K extends ModelKind> = Extract<CatalogModel, { kind: K }>;

export interface AnalysisModel {
  id: string;
  name: string;
  pricing: TokenRates;
}

export interface Catalog {
  models: CatalogModel[];
  analysis: AnalysisModel;
  /** The discovery entry of a model, or undefined when unknown. */
  find(id: string): CatalogModel | undefined;
  /** What `GET /api/generate/models` lists. */
  publicModels(): PublicModel[];
}

const KINDS = new Set(['image', 'video', 'audio', 'text']);
/**
 * Loads and checks the catalog; a broken file stops start-up with a message naming the entry.
 * `providers`: the provider names a model may give (the registered providers' names,
 * from server/providers/remote, handed in at the composition root); absent, any
 * name is kept here and the providers' registry refuses an unknown one.
 */
export function loadCatalog(file: string, providers?: readonly string[]): Catalog {
  // Kept parsed by the build (yaml-file.ts): a start that finds every file parsed never loads the YAML parser.
  const doc = readYamlFile(file) as { models?: unknown; analysis?: { id?: unknown; name?: unknown; pricing?: unknown } };
  if (!Array.isArray(doc?.models)) throw new Error(`${file}: "models" must be a list`);
  const seen = new Set<string>();
  const models = doc.models.map((raw, i) => {
    const m = raw as {
      id: string;
      name: string;
      kind: ModelKind;
      available?: boolean;
      baseGems?: number;
      capabilities: unknown;
      pricing: unknown;
      provider?: unknown;
    } & Record<string, unknown>;
    const where = `${file}: models[${i}]`;
    if (typeof m?.id !== 'string' || !/^[A-Za-z0-9._:-]{1,150}$/.test(m.id)) throw new Error(`${where}: bad id`);
    if (seen.has(m.id)) throw new Error(`${where}: duplicate id ${m.id}`);
    seen.add(m.id);
    if (typeof m.name !== 'string') throw new Error(`${where}: name must be a string`);
    if (!KINDS.has(m.kind)) throw new Error(`${where}: kind must be image, video, audio or text`);
    if (typeof m.capabilities !== 'object' || m.capabilities === null) throw new Error(`${where}: capabilities must be an object`);
    if (typeof m.pricing !== 'object' || m.pricing === null) throw new Error(`${where}: pricing must be an object`);
    const entry = parseEntry(m.kind, m, `${where} (${m.id})`);
    const model: CatalogModel = { ...entry, id: m.id, name: m.name, listedCapabilities: m.capabilities as Record<string, unknown> };
    if (m.provider !== undefined) {
      if (typeof m.provider !== 'string' || (providers && !providers.includes(m.provider)))
        throw new Error(`${where}: provider must be one of ${(providers ?? ['local']).join(', ')}`);
      model.provider = m.provider;
      if (Object.hasOwn(m, m.provider) && m.provider !== 'local') model.providerEntry = m[m.provider];
    }
    if (m.deployments !== undefined) {
      if (m.provider !== undefined) throw new Error(`${where}: give provider or deployments, not both`);
      model.deploymentsEntry = m.deployments;
    }
    if (m.available !== undefined) model.available = m.available;
    if (m.baseGems !== undefined) model.baseGems = m.baseGems;
    return model;
  });
  const raw = doc.analysis;
  if (!raw || typeof raw.id !== 'string' || typeof raw.pricing !== 'object') {
    throw new Error(`${file}: "analysis" must name the video-analysis model and its pricing`);
  }
  const analysis: AnalysisModel = { id: raw.id, name: String(raw.name ?? raw.id), pricing: parseRates(raw.pricing, `${file}: analysis`) };
  const byId = new Map(models.map((m) => [m.id, m]));
  return {
    models,
    analysis,
    find: (id) => byId.get(id),
    publicModels: () => models.map(toPublic),
  };
}

function toPublic(m: CatalogModel): PublicModel {
  const entry: PublicModel = { id: m.id, name: m.name, kind: m.kind, capabilities: m.listedCapabilities };
  // Video entries currently omit `available` and `baseGems` (spec, Model).
  if (m.kind !== 'video' && m.available !== undefined) entry.available = m.available;
  if (m.kind === 'image' && m.baseGems !== undefined) entry.baseGems = m.baseGems;
  return entry;
}
