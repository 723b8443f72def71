/**
 * Senses: a trigger word read in the sense of the field the text is about. A
 * photographer shoots people, a player's boss keeps killing them, a fisher
 * bleeds a tuna, a web page hides a body of text, a self-defense class breaks
 * a wrist grab: the same words that, about a person and with no such field,
 * are a request for harm. The policy's `senses` say, per field, which words
 * have the benign sense (a concept), which words name the field (its cues), and
 * what keeps the harmful reading whatever the field:
 *
 * - `near`: a cue within that many words of the trigger word reads it in the
 *   field ("how do I shoot my girlfriend at golden hour"); `object: true`
 *   instead asks that the cue be what the word acts on, a couple of words on
 *   with no person or preposition between ("bleed a tuna", "butcher a whole
 *   deer", "destroy bacteria"), so "bleed someone out" keeps its harm;
 * - `keep`: concepts that, as what the word acts on (articles and prepositions
 *   skipped), keep the harmful reading ("kill my boss with a python script"
 *   keeps its kill; "kill the process" does not);
 * - `unless`: concepts anywhere in the text that keep it (a weapon, a wish to
 *   go undetected, a body to hide, a demand that it work in real life).
 *
 * A word read in a field is masked like the policy's masks (intents.ts): no
 * concept and no term sees it. Each sense looks at the concepts already found,
 * so a text with no trigger word of any field pays a map look-up per concept
 * found; a text with one walks each trigger word's neighbourhood once: linear
 * in the text.
 */
import { FREE, firstFrom, MAX_PHRASE, PREPOSITIONS, type Occurrence } from './intents.ts';
import { work, type Token } from './normalize.ts';

export interface Sense {
  /** The concept whose words have the field's sense. */
  words: string;
  /** Concepts whose words name the field. */
  cues: string[];
  /** How many words from the trigger word a cue may stand (when `object` is false). */
  near: number;
  /** Whether the cue must be what the word acts on rather than near it. */
  object: boolean;
  keep: string[];
  unless: string[];
}

/** Words past the trigger word, not counting articles, that what it acts on may stand ("butcher a whole wild deer"). */
const OBJECT_GAP = 2;
/** The most words looked at past a trigger word for what it acts on. */
const OBJECT_REACH = 6;

const NONE: Occurrence[] = [];

/** Whether one of `concepts` has an occurrence starting at word `at`. */
function startsAt(found: Map<string, Occurrence[]>, concepts: readonly string[], at: number): boolean {
  for (const c of concepts) {
    const list = found.get(c) ?? NONE;
    const first = firstFrom(list, at);
    if (first < list.length && list[first]!.start === at) return true;
  }
  return false;
}

/** Whether what the word ending at `end` acts on (articles and prepositions skipped) is one of `keep`. */
function keptBy(tokens: Token[], found: Map<string, Occurrence[]>, keep: readonly string[], end: number): boolean {
  if (keep.length === 0) return false;
  for (let i = end; i < tokens.length && i < end + OBJECT_REACH; i++) {
    if (startsAt(found, keep, i)) return true;
    const stem = tokens[i]!.stem;
    if (!FREE.has(stem) && !PREPOSITIONS.has(stem)) return false;
  }
  return false;
}

/** Whether a cue is what the word ending at `end` acts on: a couple of words on, no person or preposition between. */
function actsOnCue(tokens: Token[], found: Map<string, Occurrence[]>, sense: Sense, end: number): boolean {
  let counted = 0;
  for (let i = end; i < tokens.length && i < end + OBJECT_REACH; i++) {
    work.steps++;
    if (startsAt(found, sense.keep, i)) return false;
    if (startsAt(found, sense.cues, i)) return true;
    const stem = tokens[i]!.stem;
    if (PREPOSITIONS.has(stem)) return false;
    if (!FREE.has(stem) || tokens[i]!.possessive) counted++;
    if (counted > OBJECT_GAP) return false;
  }
  return false;
}

/** Whether a cue of the sense lies within `near` words of `o`. */
function cueNear(found: Map<string, Occurrence[]>, sense: Sense, o: Occurrence): boolean {
  for (const c of sense.cues) {
    const list = found.get(c) ?? NONE;
    // In text order, an occurrence's end is at most MAX_PHRASE words past its start.
    for (let at = firstFrom(list, o.start - sense.near - MAX_PHRASE); at < list.length; at++) {
      const cue = list[at]!;
      work.steps++;
      if (cue.start > o.end + sense.near) break;
      if (cue.end >= o.start - sense.near) return true;
    }
  }
  return false;
}

/** A policy's senses by the concept of their words, made once per policy. */
const byWords = new WeakMap<readonly Sense[], ReadonlyMap<string, readonly Sense[]>>();

function sensesByWords(senses: readonly Sense[]): ReadonlyMap<string, readonly Sense[]> {
  let index = byWords.get(senses);
  if (index === undefined) {
    const built = new Map<string, Sense[]>();
    for (const sense of senses) {
      const list = built.get(sense.words) ?? [];
      list.push(sense);
      built.set(sense.words, list);
    }
    byWords.set(senses, (index = built));
  }
  return index;
}

/**
 * Marks in `masked` the words each sense reads in its field (see above); returns whether any
 * was marked. `found`: the concepts of the text, its masks and named objects already out. Only
 * the senses of the concepts found are read (what each marks is marked whatever the order).
 */
export function maskSenses(tokens: Token[], found: Map<string, Occurrence[]>, masked: boolean[], senses: readonly Sense[]): boolean {
  let changed = false;
  const index = sensesByWords(senses);
  for (const concept of found.keys()) {
    const list = index.get(concept);
    if (list === undefined) continue;
    const words = found.get(concept)!;
    for (const sense of list) {
      if (!sense.cues.some((c) => found.has(c))) continue;
      if (sense.unless.some((c) => found.has(c))) continue;
      for (const o of words) {
        if (keptBy(tokens, found, sense.keep, o.end)) continue;
        if (!(sense.object ? actsOnCue(tokens, found, sense, o.end) : cueNear(found, sense, o))) continue;
        for (let k = o.start; k < o.end; k++) {
          if (masked[k]) continue;
          masked[k] = true;
          changed = true;
        }
      }
    }
  }
  return changed;
}
