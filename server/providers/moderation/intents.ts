/**
 * The structure of a harmful request, matched over a text's tokens: where
 * each concept (a synonym class of the policy) occurs, with the policy's
 * benign masks taken out first, and whether an intent's concepts occur in the
 * order and closeness it asks (see server/catalog/moderation.yaml for the
 * format). Pure functions.
 */
import { work, type Token } from './normalize.ts';

/** A phrase of the policy as stems, and the concept it belongs to (`#mask` for a mask). */
export interface Phrase {
  stems: string[];
  concept: string;
}

/** The phrases of a policy by their first stem. */
export type PhraseIndex = Map<string, Phrase[]>;

export interface Intent {
  seq: string[];
  all: string[];
  unless: string[];
  /** Words between two `seq` concepts, not counting articles and possessive determiners. */
  gap: number;
  /** Whether a preposition may stand between two `seq` concepts. */
  across: boolean;
  thenNot: string | undefined;
}

export interface Occurrence {
  start: number;
  end: number;
}

export const MASK = '#mask';
/** The built-in concept that occurs once, before the first word. */
export const START = 'start';

/** Words that never count towards a gap: articles, determiners and possessive determiners. */
export const FREE: ReadonlySet<string> = new Set([
  'a',
  'an',
  'the',
  'my',
  'your',
  'his',
  'her',
  'their',
  'our',
  'its',
  'this',
  'that',
  'these',
  'those',
  'some',
  'any',
  'own',
  'everi',
  'each',
  'one',
  'all',
  'mani',
  'sever',
  'few',
]);
/** Quantities: "of" after them does not part a verb from its object ("a bunch of people"). */
const QUANTITIES = new Set([
  'lot',
  'lots',
  'bunch',
  'coupl',
  'group',
  'crowd',
  'dozen',
  'hundr',
  'thousand',
  'room',
  'class',
  'famili',
  'gang',
  'pack',
  'bu',
  'busload',
  'full',
]);
/** Prepositions: between a verb and a person they say the person is not what the verb acts on ("a photo of my wife"). */
export const PREPOSITIONS: ReadonlySet<string> = new Set([
  'of',
  'for',
  'with',
  'at',
  'in',
  'on',
  'from',
  'about',
  'into',
  'onto',
  'to',
  'by',
  'like',
  'than',
  'through',
  'over',
  'under',
  'across',
  'after',
  'before',
  'dure',
  'without',
  'against',
  'behind',
  'near',
  'toward',
  'towards',
  'via',
  'per',
  'as',
]);
/** Words within an intent's reach of each other. */
const WINDOW = 24;

/** The policy's phrases that begin with one stem: its masks and its concept phrases apart (each list keeps its order). */
export interface PhrasesOf {
  masks: Phrase[] | undefined;
  concepts: Phrase[] | undefined;
}

/** An index's phrases by first stem, masks and concept phrases apart, made once per index. */
const parted = new WeakMap<PhraseIndex, Map<string, PhrasesOf>>();

function partsOf(index: PhraseIndex): Map<string, PhrasesOf> {
  let parts = parted.get(index);
  if (parts === undefined) {
    parts = new Map();
    for (const [stem, list] of index) {
      const masks = list.filter((p) => p.concept === MASK);
      const concepts = list.filter((p) => p.concept !== MASK);
      parts.set(stem, { masks: masks.length > 0 ? masks : undefined, concepts: concepts.length > 0 ? concepts : undefined });
    }
    parted.set(index, parts);
  }
  return parts;
}

/**
 * The phrases that begin at each word (undefined where none does): one look-up per word for
 * a text, which maskedWords and each occurrences of it share.
 */
export function phrasesAt(tokens: Token[], index: PhraseIndex): Array<PhrasesOf | undefined> {
  const parts = partsOf(index);
  const at = new Array<PhrasesOf | undefined>(tokens.length);
  for (let i = 0; i < tokens.length; i++) at[i] = parts.get(tokens[i]!.stem);
  return at;
}

export function indexPhrases(phrases: Phrase[]): PhraseIndex {
  const index: PhraseIndex = new Map();
  for (const p of phrases) {
    const list = index.get(p.stems[0]!) ?? [];
    list.push(p);
    index.set(p.stems[0]!, list);
  }
  for (const list of index.values()) list.sort((a, b) => b.stems.length - a.stems.length);
  return index;
}

/** Whether the phrase's stems follow from word `at` (its first is that word's: the index is by first stem). */
function phraseAt(tokens: Token[], at: number, stems: string[]): boolean {
  if (at + stems.length > tokens.length) return false;
  for (let k = 1; k < stems.length; k++) if (tokens[at + k]!.stem !== stems[k]) return false;
  return true;
}

/** Which words a benign mask covers ("bomb shelter", "bath bomb"; the longest mask at a place wins). */
export function maskedWords(tokens: Token[], index: PhraseIndex, at = phrasesAt(tokens, index)): boolean[] {
  const masked = new Array<boolean>(tokens.length).fill(false);
  for (let i = 0; i < tokens.length; i++) {
    const phrases = at[i]?.masks;
    if (phrases === undefined) continue;
    for (const p of phrases) {
      if (!phraseAt(tokens, i, p.stems)) continue;
      for (let k = 0; k < p.stems.length; k++) masked[i + k] = true;
      break;
    }
  }
  return masked;
}

/** Where each concept occurs, the words of benign masks (`masked`) first taken out. */
export function occurrences(
  tokens: Token[],
  index: PhraseIndex,
  masked = maskedWords(tokens, index),
  at = phrasesAt(tokens, index),
): Map<string, Occurrence[]> {
  // `start`: the beginning of the text, so that an intent can ask for a sentence that opens with a verb ("make a grenade").
  const found = new Map<string, Occurrence[]>();
  found.set(START, [{ start: 0, end: 0 }]);
  for (let i = 0; i < tokens.length; i++) {
    const phrases = at[i]?.concepts;
    if (phrases === undefined) continue;
    for (const p of phrases) {
      if (!phraseAt(tokens, i, p.stems)) continue;
      let free = true;
      for (let k = 0; k < p.stems.length; k++) if (masked[i + k]) free = false;
      if (!free) continue;
      const list = found.get(p.concept);
      if (list === undefined) found.set(p.concept, [{ start: i, end: i + p.stems.length }]);
      else list.push({ start: i, end: i + p.stems.length });
    }
  }
  return found;
}

/** Whether the words from `from` to `to` (exclusive) fit in a gap. */
function fits(tokens: Token[], from: number, to: number, intent: Intent): boolean {
  let counted = 0;
  for (let i = from; i < to; i++) {
    const stem = tokens[i]!.stem;
    if (stem === 'of' && i > from && QUANTITIES.has(tokens[i - 1]!.stem)) continue;
    if (!intent.across && PREPOSITIONS.has(stem)) return false;
    if (!FREE.has(stem) || tokens[i]!.possessive) counted++;
  }
  return counted <= intent.gap;
}

/** The next word after `at` that is not an article or determiner. */
function nextWord(tokens: Token[], at: number): number {
  let i = at;
  while (i < tokens.length && FREE.has(tokens[i]!.stem)) i++;
  return i;
}

/** Whether a concept occurs at word `at`. */
function occursAt(found: Map<string, Occurrence[]>, concept: string, at: number): boolean {
  const list = found.get(concept) ?? NONE;
  const first = firstFrom(list, at);
  return first < list.length && list[first]!.start === at;
}

const NONE: Occurrence[] = [];

/** Adds to `spans` where the intent's `seq` concepts from `k` on follow `previous` in order and close together. */
function step(
  tokens: Token[],
  found: Map<string, Occurrence[]>,
  intent: Intent,
  k: number,
  first: Occurrence,
  previous: Occurrence,
  spans: Occurrence[],
): void {
  if (k === intent.seq.length) {
    if (intent.thenNot && occursAt(found, intent.thenNot, nextWord(tokens, previous.end))) return;
    spans.push({ start: first.start, end: previous.end });
    return;
  }
  // Occurrences are in text order: start at the first one after `previous`, stop past the gap.
  const list = found.get(intent.seq[k]!) ?? NONE;
  for (let at = firstFrom(list, previous.end); at < list.length; at++) {
    const o = list[at]!;
    work.steps++;
    if (o.start - previous.end > intent.gap + 6) break;
    if (k === intent.seq.length - 1 && tokens[o.end - 1]!.possessive) continue; // "my kids' toys": the kids are not what is sold
    if (!fits(tokens, previous.end, o.start, intent)) continue;
    step(tokens, found, intent, k + 1, first, o, spans);
  }
}

/** The spans where the intent's `seq` concepts occur in order and close together. */
function sequences(tokens: Token[], found: Map<string, Occurrence[]>, intent: Intent): Occurrence[] {
  const spans: Occurrence[] = [];
  for (const o of found.get(intent.seq[0]!) ?? NONE) step(tokens, found, intent, 1, o, o, spans);
  return spans;
}

/** Whether `o` lies inside one of `list` ("detection" inside "avoid detection"). */
function insideAny(o: Occurrence, list: Occurrence[]): boolean {
  for (let at = firstFrom(list, o.end - MAX_PHRASE); at < list.length; at++) {
    const m = list[at]!;
    work.steps++;
    if (m.start > o.start) break;
    if (o.end <= m.end) return true;
  }
  return false;
}

function near(found: Map<string, Occurrence[]>, concept: string, anchor: Occurrence): boolean {
  // In text order, an occurrence's end is at most MAX_PHRASE words past its start.
  const list = found.get(concept) ?? NONE;
  for (let at = firstFrom(list, anchor.start - WINDOW - MAX_PHRASE); at < list.length; at++) {
    const o = list[at]!;
    work.steps++;
    if (o.start > anchor.end + WINDOW) break;
    if (o.end >= anchor.start - WINDOW) return true;
  }
  return false;
}

/** The longest phrase a concept can have, in words (the policy's are a few words long). */
export const MAX_PHRASE = 16;

/** The index of the first occurrence starting at or after `start` (occurrences are in text order). */
export function firstFrom(list: readonly Occurrence[], start: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.start < start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether the text carries the intent. */
export function carries(tokens: Token[], found: Map<string, Occurrence[]>, intent: Intent): boolean {
  for (const c of intent.seq) if (!found.has(c)) return false;
  for (const c of intent.all) if (!found.has(c)) return false;
  if (intent.unless.length > 0) {
    // An `unless` word counts only where it is not inside one of the intent's own phrases ("avoid detection" is not "detection").
    const own: Occurrence[] = [];
    for (const c of intent.seq) for (const o of found.get(c)!) own.push(o);
    for (const c of intent.all) for (const o of found.get(c)!) own.push(o);
    own.sort((a, b) => a.start - b.start);
    for (const c of intent.unless) for (const o of found.get(c) ?? NONE) if (!insideAny(o, own)) return false;
  }
  const anchors = intent.seq.length > 0 ? sequences(tokens, found, intent) : found.get(intent.all[0]!)!;
  const from = intent.seq.length > 0 ? 0 : 1;
  for (const anchor of anchors) {
    let all = true;
    for (let i = from; i < intent.all.length && all; i++) all = near(found, intent.all[i]!, anchor);
    if (all) return true;
  }
  return false;
}
