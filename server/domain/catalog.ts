/**
 * The model catalog: a YAML file a person can edit (server/catalog/models.yaml).
 * Discovery lists its public part; the private rate card stays on the server.
 */
import fs from 'node:fs';
import YAML from 'yaml';
import type { components } from '../../generated/api.ts';

export type PublicModel = components['schemas']['Model'];
export type ModelKind = PublicModel['kind'];

/** A catalog entry: the public model plus its private rate card. */
export interface CatalogModel {
  id: string;
  name: string;
  kind: ModelKind;
  available?: boolean;
  baseGems?: number;
  capabilities: Record<string, unknown>;
  pricing: Record<string, unknown>;
}

export interface AnalysisModel {
  id: string;
  name: string;
  pricing: { inputPerThousandTokens: number; outputPerThousandTokens: number };
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

/** Loads and checks the catalog; a broken file stops start-up with a message naming the entry. */
export function loadCatalog(file: string): Catalog {
  const doc = YAML.parse(fs.readFileSync(file, 'utf8')) as { models?: unknown; analysis?: AnalysisModel };
  if (!Array.isArray(doc?.models)) throw new Error(`${file}: "models" must be a list`);
  const seen = new Set<string>();
  const models = doc.models.map((raw, i) => {
    const m = raw as CatalogModel;
    const where = `${file}: models[${i}]`;
    if (typeof m?.id !== 'string' || !/^[A-Za-z0-9._:-]{1,150}$/.test(m.id)) throw new Error(`${where}: bad id`);
    if (seen.has(m.id)) throw new Error(`${where}: duplicate id ${m.id}`);
    seen.add(m.id);
    if (typeof m.name !== 'string') throw new Error(`${where}: name must be a string`);
    if (!KINDS.has(m.kind)) throw new Error(`${where}: kind must be image, video, audio or text`);
    if (typeof m.capabilities !== 'object' || m.capabilities === null) throw new Error(`${where}: capabilities must be an object`);
    if (typeof m.pricing !== 'object' || m.pricing === null) throw new Error(`${where}: pricing must be an object`);
    return m;
  });
  const analysis = doc.analysis;
  if (!analysis || typeof analysis.id !== 'string' || typeof analysis.pricing !== 'object') {
    throw new Error(`${file}: "analysis" must name the video-analysis model and its pricing`);
  }
  const byId = new Map(models.map((m) => [m.id, m]));
  return {
    models,
    analysis,
    find: (id) => byId.get(id),
    publicModels: () => models.map(toPublic),
  };
}

function toPublic(m: CatalogModel): PublicModel {
  const entry: PublicModel = { id: m.id, name: m.name, kind: m.kind, capabilities: m.capabilities };
  // Video entries currently omit `available` and `baseGems` (spec, Model).
  if (m.kind !== 'video' && m.available !== undefined) entry.available = m.available;
  if (m.kind === 'image' && m.baseGems !== undefined) entry.baseGems = m.baseGems;
  return entry;
}
