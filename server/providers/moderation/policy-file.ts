/**
 * The embedded moderation policy: an editable YAML file of categories (see
 * server/catalog/moderation.yaml for the format), read and validated once at
 * start. A broken file stops the start with a message naming the entry.
 */
import fs from 'node:fs';
import YAML from 'yaml';
import type { ContentPreference } from './types.ts';
import { termKey } from './normalize.ts';

export type Strictness = ContentPreference;

export interface ModerationCategory {
  id: string;
  description: string;
  /** `standard`: applies to every account; `strict`: only to accounts whose content preference is strict. */
  strictness: Strictness;
  /** The terms as `contains` compares them (normalised, squeezed), with the term each came from. */
  terms: Array<{ term: string; key: string }>;
  /** Regular expressions over the normalised words separated by single spaces. */
  patterns: RegExp[];
  /** Category names of an OpenAI-compatible moderation endpoint that mean this category. */
  upstream: string[];
}

export interface ModerationPolicy {
  categories: ModerationCategory[];
  /** Whether a category applies to an account with this content preference. */
  applies(category: Pick<ModerationCategory, 'strictness'>, preference: ContentPreference): boolean;
}

const ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

function stringList(value: unknown, where: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v.trim() === '')) {
    throw new Error(`${where} must be a list of non-empty strings`);
  }
  return value as string[];
}

function parseCategory(raw: unknown, where: string): ModerationCategory {
  const c = raw as Record<string, unknown>;
  if (typeof c !== 'object' || c === null) throw new Error(`${where} must be a mapping`);
  if (typeof c.id !== 'string' || !ID.test(c.id)) throw new Error(`${where}: id must be lower-case letters, digits and dashes`);
  if (c.strictness !== 'standard' && c.strictness !== 'strict') throw new Error(`${where} (${c.id}): strictness must be standard or strict`);
  const terms = stringList(c.terms, `${where} (${c.id}): terms`).map((term) => {
    const key = termKey(term);
    if (!key) throw new Error(`${where} (${c.id}): term "${term}" has no letters or digits`);
    return { term, key };
  });
  const patterns = stringList(c.patterns, `${where} (${c.id}): patterns`).map((source) => {
    try {
      return new RegExp(source, 'u');
    } catch (error) {
      throw new Error(`${where} (${c.id}): pattern ${JSON.stringify(source)} is not a valid regular expression: ${(error as Error).message}`);
    }
  });
  if (terms.length === 0 && patterns.length === 0) throw new Error(`${where} (${c.id}): give at least one term or pattern`);
  return {
    id: c.id,
    description: typeof c.description === 'string' ? c.description : c.id,
    strictness: c.strictness,
    terms,
    patterns,
    upstream: stringList(c.upstream, `${where} (${c.id}): upstream`),
  };
}

/** Builds a policy from parsed YAML (`source` names it in messages). */
export function parseModerationPolicy(doc: unknown, source: string): ModerationPolicy {
  const list = (doc as { categories?: unknown } | null)?.categories;
  if (!Array.isArray(list) || list.length === 0) throw new Error(`${source}: "categories" must be a non-empty list`);
  const seen = new Set<string>();
  const categories = list.map((raw, i) => {
    const category = parseCategory(raw, `${source}: categories[${i}]`);
    if (seen.has(category.id)) throw new Error(`${source}: categories[${i}]: duplicate id ${category.id}`);
    seen.add(category.id);
    return category;
  });
  return {
    categories,
    applies: (category, preference) => category.strictness === 'standard' || preference === 'strict',
  };
}

/** Reads and validates the policy file; throws a message naming the file and the entry. */
export function loadModerationPolicy(file: string): ModerationPolicy {
  let doc: unknown;
  try {
    doc = YAML.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`moderation policy ${file} could not be read: ${(error as Error).message}`);
  }
  return parseModerationPolicy(doc, `moderation policy ${file}`);
}
