/**
 * The embedded moderation policy: an editable YAML file of categories (see
 * server/catalog/moderation.yaml for the format), read and validated once at
 * start. A broken file stops the start with a message naming the entry.
 */
import { readYamlFile } from '../../yaml-file.ts';
import type { ContentPreference } from './types.ts';
import { fold, tokenize, Vocabulary } from './normalize.ts';
import { indexPhrases, MASK, MAX_PHRASE, START, type Intent, type Phrase, type PhraseIndex } from './intents.ts';
import type { Sense } from './senses.ts';

export type Strictness = ContentPreference;

export interface ModerationCategory {
  id: string;
  description: string;
  /** `standard`: applies to every account; `strict`: only to accounts whose content preference is strict. */
  strictness: Strictness;
  /** The terms as stems, with the term each came from. */
  terms: Array<{ term: string; stems: string[] }>;
  /** Regular expressions over the normalised words separated by single spaces. */
  patterns: RegExp[];
  /** The structures of a harmful request (see moderation.yaml). */
  intents: Intent[];
  /** Category names of an OpenAI-compatible moderation endpoint that mean this category. */
  upstream: string[];
}

export interface ModerationPolicy {
  categories: ModerationCategory[];
  /** The words the policy knows, for reading rewritten text. */
  vocabulary: Vocabulary;
  /** Concept phrases and masks by first stem. */
  phrases: PhraseIndex;
  /** Trigger words read in the sense of a field its cues name (senses.ts). */
  senses: Sense[];
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

/** The words of a phrase as written, for the vocabulary. */
function rawWords(phrase: string): string[] {
  return fold(phrase)
    .replace(/'/g, '')
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
}

function stemsOf(phrase: string, vocabulary: Vocabulary, where: string): string[] {
  const stems = tokenize(phrase, vocabulary).map((t) => t.stem);
  if (stems.length === 0) throw new Error(`${where}: "${phrase}" has no letters or digits`);
  // The matcher looks this far back for a phrase that covers a word (intents.ts).
  if (stems.length > MAX_PHRASE) throw new Error(`${where}: "${phrase}" has more than ${MAX_PHRASE} words`);
  return stems;
}

/**
 * The entry `raw` as a mapping of `keys` only, and a reader of its lists of concept names
 * (`start`, which every text holds, only where `start` is allowed).
 */
function entryOf(raw: unknown, where: string, keys: readonly string[], concepts: Set<string>, start: boolean) {
  const entry = raw as Record<string, unknown>;
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new Error(`${where} must be a mapping`);
  const unknown = Object.keys(entry).filter((k) => !keys.includes(k));
  if (unknown.length > 0) throw new Error(`${where}: unknown key ${unknown[0]} (use ${keys.join(', ')})`);
  const names = (key: string) => {
    const list = stringList(entry[key], `${where}: ${key}`);
    for (const c of list) if (!concepts.has(c) || (!start && c === START)) throw new Error(`${where}: ${key} names an unknown concept "${c}"`);
    return list;
  };
  return { entry, names };
}

const INTENT_KEYS = ['seq', 'all', 'unless', 'gap', 'across', 'thenNot'];

function parseIntent(raw: unknown, where: string, concepts: Set<string>): Intent {
  const { entry: i, names } = entryOf(raw, where, INTENT_KEYS, concepts, true);
  const seq = names('seq');
  const all = names('all');
  if (seq.length === 0 && all.length === 0) throw new Error(`${where}: give seq or all`);
  const gap = i.gap ?? 2;
  if (typeof gap !== 'number' || !Number.isInteger(gap) || gap < 0 || gap > 10) throw new Error(`${where}: gap must be a whole number from 0 to 10`);
  if (i.across !== undefined && typeof i.across !== 'boolean') throw new Error(`${where}: across must be true or false`);
  if (i.thenNot !== undefined && (typeof i.thenNot !== 'string' || !concepts.has(i.thenNot))) throw new Error(`${where}: thenNot must name a concept`);
  return { seq, all, unless: names('unless'), gap, across: i.across === true, thenNot: i.thenNot };
}

const SENSE_KEYS = ['words', 'cues', 'near', 'object', 'keep', 'unless'];

function parseSense(raw: unknown, where: string, concepts: Set<string>): Sense {
  const { entry: s, names } = entryOf(raw, where, SENSE_KEYS, concepts, false);
  if (typeof s.words !== 'string' || !concepts.has(s.words) || s.words === START) throw new Error(`${where}: words must name a concept`);
  const cues = names('cues');
  if (cues.length === 0) throw new Error(`${where}: cues must name at least one concept`);
  if (s.object !== undefined && typeof s.object !== 'boolean') throw new Error(`${where}: object must be true or false`);
  const near = s.near ?? 12;
  if (typeof near !== 'number' || !Number.isInteger(near) || near < 1 || near > 24) throw new Error(`${where}: near must be a whole number from 1 to 24`);
  return { words: s.words, cues, near, object: s.object === true, keep: names('keep'), unless: names('unless') };
}

function parseCategory(raw: unknown, where: string, vocabulary: Vocabulary, concepts: Set<string>): ModerationCategory {
  const c = raw as Record<string, unknown>;
  if (typeof c !== 'object' || c === null) throw new Error(`${where} must be a mapping`);
  if (typeof c.id !== 'string' || !ID.test(c.id)) throw new Error(`${where}: id must be lower-case letters, digits and dashes`);
  if (c.strictness !== 'standard' && c.strictness !== 'strict') throw new Error(`${where} (${c.id}): strictness must be standard or strict`);
  const terms = stringList(c.terms, `${where} (${c.id}): terms`).map((term) => {
    if (!/[\p{L}\p{N}]/u.test(term)) throw new Error(`${where} (${c.id}): term "${term}" has no letters or digits`);
    return { term, stems: stemsOf(term, vocabulary, `${where} (${c.id}): term`) };
  });
  const patterns = stringList(c.patterns, `${where} (${c.id}): patterns`).map((source) => {
    try {
      return new RegExp(source, 'u');
    } catch (error) {
      throw new Error(`${where} (${c.id}): pattern ${JSON.stringify(source)} is not a valid regular expression: ${(error as Error).message}`);
    }
  });
  if (c.intents !== undefined && !Array.isArray(c.intents)) throw new Error(`${where} (${c.id}): intents must be a list`);
  const intents = ((c.intents as unknown[] | undefined) ?? []).map((i, n) => parseIntent(i, `${where} (${c.id}): intents[${n}]`, concepts));
  if (terms.length === 0 && patterns.length === 0 && intents.length === 0) throw new Error(`${where} (${c.id}): give at least one term, pattern or intent`);
  return {
    id: c.id,
    description: typeof c.description === 'string' ? c.description : c.id,
    strictness: c.strictness,
    terms,
    patterns,
    intents,
    upstream: stringList(c.upstream, `${where} (${c.id}): upstream`),
  };
}

/** Builds a policy from parsed YAML (`source` names it in messages). */
export function parseModerationPolicy(doc: unknown, source: string): ModerationPolicy {
  const d = (doc ?? {}) as { categories?: unknown; concepts?: unknown; masks?: unknown; senses?: unknown };
  const list = d.categories;
  if (!Array.isArray(list) || list.length === 0) throw new Error(`${source}: "categories" must be a non-empty list`);
  const rawConcepts = d.concepts ?? {};
  if (typeof rawConcepts !== 'object' || rawConcepts === null || Array.isArray(rawConcepts))
    throw new Error(`${source}: "concepts" must map names to lists of phrases`);
  const concepts = Object.entries(rawConcepts as Record<string, unknown>).map(([name, phrases]) => {
    if (!ID.test(name)) throw new Error(`${source}: concepts: name "${name}" must be lower-case letters, digits and dashes`);
    const listed = stringList(phrases, `${source}: concepts.${name}`);
    if (listed.length === 0) throw new Error(`${source}: concepts.${name} must list at least one phrase`);
    return { name, phrases: listed };
  });
  const masks = stringList(d.masks, `${source}: masks`);

  // The vocabulary holds every word the policy writes, so that rewritten text is read towards them.
  const words = new Set<string>();
  const terms = list.flatMap((c) =>
    (c as { terms?: unknown })?.terms instanceof Array ? ((c as { terms: unknown[] }).terms.filter((t) => typeof t === 'string') as string[]) : [],
  );
  for (const phrase of [...concepts.flatMap((c) => c.phrases), ...masks, ...terms]) for (const w of rawWords(phrase)) words.add(w);
  const vocabulary = new Vocabulary(words);

  const phrases: Phrase[] = [
    ...concepts.flatMap(({ name, phrases }) => phrases.map((p) => ({ stems: stemsOf(p, vocabulary, `${source}: concepts.${name}`), concept: name }))),
    ...masks.map((p) => ({ stems: stemsOf(p, vocabulary, `${source}: masks`), concept: MASK })),
  ];
  const names = new Set([START, ...concepts.map((c) => c.name)]);
  const seen = new Set<string>();
  const categories = list.map((raw, i) => {
    const category = parseCategory(raw, `${source}: categories[${i}]`, vocabulary, names);
    if (seen.has(category.id)) throw new Error(`${source}: categories[${i}]: duplicate id ${category.id}`);
    seen.add(category.id);
    return category;
  });
  if (d.senses !== undefined && !Array.isArray(d.senses)) throw new Error(`${source}: "senses" must be a list`);
  const senses = ((d.senses as unknown[] | undefined) ?? []).map((s, i) => parseSense(s, `${source}: senses[${i}]`, names));
  const policy: ModerationPolicy = {
    categories,
    vocabulary,
    phrases: indexPhrases(phrases),
    senses,
    applies: (category, preference) => category.strictness === 'standard' || preference === 'strict',
  };
  documents.set(policy, { doc, source });
  return policy;
}

/** The parsed YAML each policy was built from (kept while the policy lives). */
const documents = new WeakMap<ModerationPolicy, PolicyDocument>();

/** What a policy was built from: `parseModerationPolicy(doc, source)` builds the same policy again. */
export interface PolicyDocument {
  doc: unknown;
  source: string;
}

/**
 * The document `policy` was built from, so that another thread builds the very policy this one
 * judges with (off-thread.ts), not whatever the file holds by then.
 */
export function policyDocument(policy: ModerationPolicy): PolicyDocument {
  const document = documents.get(policy);
  if (document === undefined) throw new Error('this moderation policy was not built by parseModerationPolicy');
  return document;
}

/** Reads and validates the policy file; throws a message naming the file and the entry. */
export function loadModerationPolicy(file: string): ModerationPolicy {
  let doc: unknown;
  try {
    doc = readYamlFile(file);
  } catch (error) {
    throw new Error(`moderation policy ${file} could not be read: ${(error as Error).message}`);
  }
  return parseModerationPolicy(doc, `moderation policy ${file}`);
}
