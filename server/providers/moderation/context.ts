/**
 * Benign context: what makes a trigger word harmless in its phrase, as a
 * structure rather than a list of phrases. A word is read as part of a named
 * object (the policy's `named-object` concept: a shelter, a calorimeter, a
 * coop, a process, a tree, a cake) when
 *
 * - it modifies the object, directly before it with nothing between: "bomb
 *   shelter", "bomb calorimeter", "dead tree", "naked mole rat", "Roma
 *   tomatoes", "death by chocolate"; a determiner between makes the word a verb and the object what
 *   it acts on, so "bomb the shelter" keeps its harm;
 * - it is made into a protective compound: "bomb-proof", "bullet-proof",
 *   "fire resistant";
 * - the object is what it is said of, an auxiliary or a negation between:
 *   "the container won't die", "the battery is dead", "the plant in my office
 *   is dying".
 *
 * Such words are masked like the policy's own masks (intents.ts): no concept
 * and no term sees them. One pass over the words: linear in the text.
 *
 * A protective purpose is read here too: "so my teenager can't overdose", "so
 * the kids don't get hurt" (a person other than the writer, then a negation,
 * then a harm) is a recovery and a protective frame, as the policy's
 * `recovery` and `protective` phrases are.
 * "so my parents won't notice" is none: what is negated must be a harm.
 */
import type { Token } from './normalize.ts';
import { FREE, type Occurrence } from './intents.ts';
import { RECOVERY } from './frames.ts';

export const NAMED_OBJECT = 'named-object';
/** The policy's things ("sell kids clothes"): what is said of one is said of a thing. */
export const THING = 'thing';

/** Words that make the word before them a protection against it ("bomb-proof"). */
const PROTECTIVE_SUFFIXES = new Set(['proof', 'resist', 'safe']);

/** Words that stand between an object and what is said of it ("won't", "is", "keeps"). */
const AUXILIARIES = new Set([
  'wont',
  'will',
  'not',
  'doesnt',
  'dont',
  'didnt',
  'cant',
  'wouldnt',
  'isnt',
  'is',
  'was',
  'has',
  'keep',
  'just',
  'still',
  'alreadi',
  'seem',
  'look',
  'gone',
  'went',
  'got',
  'are',
  'were',
  'be',
  'been',
]);

/** Prepositions of place after an object ("in my office"), and the most words such a phrase has. */
const PLACES = new Set(['in', 'on', 'at', 'by', 'near', 'behind', 'outsid', 'insid']);
const MOST_PLACE_WORDS = 3;

/** The most auxiliaries between an object and what is said of it. */
const MOST_AUXILIARIES = 3;

/**
 * Marks in `masked` the words a named object makes harmless; returns whether any was marked.
 * `objects`: where the named objects occur (in text order); `things`: where the policy's other
 * things occur (a phone, a car), of which only what is said of them is masked.
 */
export function maskNamedObjects(tokens: Token[], objects: readonly Occurrence[] | undefined, masked: boolean[], things: readonly Occurrence[] = []): boolean {
  let changed = false;
  const mask = (i: number) => {
    if (i >= 0 && i < tokens.length && !masked[i]) {
      masked[i] = true;
      changed = true;
    }
  };
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (PROTECTIVE_SUFFIXES.has(tokens[i + 1]!.stem)) mask(i);
  }
  for (const o of objects ?? []) {
    // The word right before the object modifies it.
    if (o.start > 0 && !tokens[o.start - 1]!.possessive) mask(o.start - 1);
    // "death by chocolate": what is named after the object.
    if (o.start > 1 && tokens[o.start - 1]!.stem === 'by') mask(o.start - 2);
    saidOf(o);
  }
  // What is said of any thing is said of a thing ("my phone keeps dying"); only named objects
  // mask the word before them, since "poison food" is a verb and its object.
  for (const o of things) saidOf(o);
  return changed;

  function saidOf(o: Occurrence): void {
    // What is said of the object, past a place it is in and its auxiliaries: "won't die",
    // "is dead", "the plant in my office is dying".
    let at = o.end;
    if (at < tokens.length && PLACES.has(tokens[at]!.stem)) {
      let end = at + 1;
      while (end < tokens.length && end - at <= MOST_PLACE_WORDS && !AUXILIARIES.has(tokens[end]!.stem)) end++;
      if (end < tokens.length && AUXILIARIES.has(tokens[end]!.stem)) at = end;
    }
    let auxiliaries = 0;
    while (at < tokens.length && auxiliaries < MOST_AUXILIARIES && AUXILIARIES.has(tokens[at]!.stem)) {
      at++;
      auxiliaries++;
    }
    if (auxiliaries > 0 && at < tokens.length) mask(at);
  }
}

/** The policy's people, and its harms that a protective purpose negates. */
const PEOPLE = ['person', 'minor'];
const HARMS = ['harm', 'self-harm', 'injure'];
/** Negations of a purpose ("so my son can't …"), and the words that may stand before its harm ("get hurt"). */
const NEGATIONS = new Set(['cant', 'cannot', 'wont', 'doesnt', 'dont', 'didnt', 'couldnt', 'wouldnt', 'never', 'not']);
const LINKS = new Set(['get', 'be', 'accident', 'accidentally', 'ever', 'possibl']);
const NO_OCCURRENCES: readonly Occurrence[] = [];
/** What a protective purpose is to the policy: a frame of recovery (self-harm) and a protective one (the rest). */
const FRAMES = [RECOVERY, 'protective'];

/**
 * Adds to `found`'s recovery and protective frames each protective purpose: "so" (or "so that"), a person other
 * than the writer, a negation and a harm ("so my teenager can't overdose on it"). Returns
 * whether it added one.
 */
export function readPurposes(tokens: Token[], found: Map<string, Occurrence[]>): boolean {
  // Where each harm starts, and its end: one look-up per purpose.
  const harms = new Map<number, number>();
  for (const c of HARMS) for (const h of found.get(c) ?? NO_OCCURRENCES) harms.set(h.start, Math.max(h.end, harms.get(h.start) ?? 0));
  if (harms.size === 0) return false;
  const added: Occurrence[] = [];
  for (const c of PEOPLE) {
    for (const p of found.get(c) ?? NO_OCCURRENCES) {
      let back = p.start - 1;
      while (back >= 0 && FREE.has(tokens[back]!.stem)) back--;
      if (back < 0 || tokens[back]!.stem !== 'so') continue;
      let at = p.end;
      if (at >= tokens.length || !NEGATIONS.has(tokens[at]!.stem)) continue;
      at++;
      while (at < tokens.length && at <= p.end + 3 && (LINKS.has(tokens[at]!.stem) || NEGATIONS.has(tokens[at]!.stem))) at++;
      const end = harms.get(at);
      if (end !== undefined) added.push({ start: back, end });
    }
  }
  if (added.length === 0) return false;
  for (const frame of FRAMES)
    found.set(
      frame,
      [...(found.get(frame) ?? []), ...added].sort((a, b) => a.start - b.start),
    );
  return true;
}
