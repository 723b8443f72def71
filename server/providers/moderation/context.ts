/**
 * Benign context: what makes a trigger word harmless in its phrase, as a
 * structure rather than a list of phrases. A word is read as part of a named
 * object (the policy's `named-object` concept: a shelter, a calorimeter, a
 * coop, a process, a tree, a cake) when
 *
 * - it modifies the object, directly before it with nothing between: "bomb
 *   shelter", "bomb calorimeter", "dead tree", "naked mole rat", "Roma
 *   tomatoes", "death by chocolate", or through the object's shape or theme ("a
 *   bomb-shaped cake"); a determiner between makes the word a verb and the object what
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
/** Nouns a harm word before them only modifies ("a stabbing victim", "trafficking victims", "a gunshot wound"). */
export const HARMED_NOUN = 'harmed-noun';
/** The policy's things ("sell kids clothes"): what is said of one is said of a thing. */
export const THING = 'thing';

/** Words that make the word before them what an object looks like ("bomb-shaped cake", "skull-themed cupcakes"). */
const LOOKS = new Set(['shape', 'theme', 'style', 'inspir', 'flavor', 'flavour', 'pattern', 'print', 'motif']);

/** Words that make the word before them a protection against it ("bomb-proof", "bomb defusal"). */
const PROTECTIVE_SUFFIXES = new Set(['proof', 'resist', 'safe', 'defus']);

/** Relative pronouns: what follows them is said of the object before ("a process that won't die"). */
const RELATIVES = new Set(['that', 'which']);

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

const NO_OCCURRENCES: readonly Occurrence[] = [];

/** The most auxiliaries between an object and what is said of it. */
const MOST_AUXILIARIES = 3;

/**
 * Marks in `masked` the words a named object makes harmless; returns whether any was marked.
 * `objects`: where the named objects occur (in text order); `things`: where the policy's other
 * things occur (a phone, a car), of which only what is said of them is masked.
 */
export function maskNamedObjects(
  tokens: Token[],
  objects: readonly Occurrence[] | undefined,
  masked: boolean[],
  things: readonly Occurrence[] = NO_OCCURRENCES,
  harmed: readonly Occurrence[] = NO_OCCURRENCES,
  violent: readonly Occurrence[] = NO_OCCURRENCES,
): boolean {
  let changed = false;
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (PROTECTIVE_SUFFIXES.has(tokens[i + 1]!.stem)) changed = mask(masked, i) || changed;
  }
  for (const o of objects ?? NO_OCCURRENCES) {
    // The word right before the object modifies it.
    if (o.start > 0 && !tokens[o.start - 1]!.possessive) changed = mask(masked, o.start - 1) || changed;
    // "a bomb-shaped cake", "a gun-themed cake": the word before the shape or theme too.
    if (o.start > 1 && LOOKS.has(tokens[o.start - 1]!.stem) && !tokens[o.start - 2]!.possessive) changed = mask(masked, o.start - 2) || changed;
    // "death by chocolate": what is named after the object.
    if (o.start > 1 && tokens[o.start - 1]!.stem === 'by') changed = mask(masked, o.start - 2) || changed;
    changed = saidOf(tokens, masked, o) || changed;
  }
  // What is said of any thing is said of a thing ("my phone keeps dying"); only named objects
  // mask the word before them, since "poison food" is a verb and its object.
  for (const o of things) changed = saidOf(tokens, masked, o) || changed;
  // "a stabbing victim", "a shooting survivor": a gerund right before the noun names the case it
  // is. Only a gerund, with nothing between: "stab the victim", "move victims across borders" and
  // "mocking Holocaust victims" keep their harm, and what is said of a victim ("make sure the
  // victim is dead") is not masked, since a victim is a person.
  // Only a gerund of an act of violence: "recruiting trafficking victims" keeps its trafficking,
  // which names the trade the victims are held in, not an event they survived.
  if (harmed.length > 0 && violent.length > 0) {
    const acts = new Set(violent.map((o) => o.start));
    for (const o of harmed) {
      const before = o.start > 0 ? tokens[o.start - 1]! : undefined;
      if (before !== undefined && !before.possessive && before.word.endsWith('ing') && acts.has(o.start - 1)) changed = mask(masked, o.start - 1) || changed;
    }
  }
  return changed;
}

/**
 * Masks word `i` (when it is a word, not yet masked); returns whether it did. A function of the
 * module, not a closure made per text: the moderation of every submission runs through here.
 */
function mask(masked: boolean[], i: number): boolean {
  if (i < 0 || i >= masked.length || masked[i]) return false;
  masked[i] = true;
  return true;
}

/**
 * Masks what is said of the object at `o`, past a place it is in and its auxiliaries: "won't
 * die", "is dead", "the plant in my office is dying". Returns whether it masked a word.
 */
function saidOf(tokens: Token[], masked: boolean[], o: Occurrence): boolean {
  let at = o.end;
  if (at < tokens.length && RELATIVES.has(tokens[at]!.stem)) at++;
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
  return auxiliaries > 0 && at < tokens.length && mask(masked, at);
}

/** The harm verbs a reflexive compound holds ("self-harm", "self-injure"). */
const REFLEXIVE_ACTS = ['harm', 'injure'];

/**
 * Drops from `found` each harm verb that is the second half of "self-…" ("she's been
 * self-harming, and the friend responds"): its object is the self, never the person after it.
 * The compound itself is still read (the `self-harm` concept). Returns whether it dropped one.
 */
export function dropReflexives(tokens: Token[], found: Map<string, Occurrence[]>): boolean {
  let dropped = false;
  for (const c of REFLEXIVE_ACTS) {
    const list = found.get(c);
    if (list === undefined) continue;
    const kept = list.filter((o) => o.start === 0 || tokens[o.start - 1]!.stem !== 'self');
    if (kept.length === list.length) continue;
    dropped = true;
    if (kept.length === 0) found.delete(c);
    else found.set(c, kept);
  }
  return dropped;
}

/** The policy's people, and its harms that a protective purpose negates. */
const PEOPLE = ['person', 'minor'];
const HARMS = ['harm', 'self-harm', 'injure'];
/** Negations of a purpose ("so my son can't …"), and the words that may stand before its harm ("get hurt"). */
const NEGATIONS = new Set(['cant', 'cannot', 'wont', 'doesnt', 'dont', 'didnt', 'couldnt', 'wouldnt', 'never', 'not']);
const LINKS = new Set(['get', 'be', 'accident', 'accidentally', 'ever', 'possibl']);
/** What a protective purpose is to the policy: a frame of recovery (self-harm) and a protective one (the rest). */
const FRAMES = [RECOVERY, 'protective'];

/**
 * Adds to `found`'s recovery and protective frames each protective purpose: "so" (or "so that"), a person other
 * than the writer, a negation and a harm ("so my teenager can't overdose on it"). Returns
 * whether it added one.
 */
export function readPurposes(tokens: Token[], found: Map<string, Occurrence[]>): boolean {
  if (!holdsAny(found, HARMS)) return false;
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

/** The frames a text of care, teaching or awareness is read in (below). */
export const CARE_VERB = 'care-verb';
export const REPORTED_SPEECH = 'reported-speech';
export const TEACH_FRAME = 'teach-frame';
export const SAFETY_FRAME = 'safety-frame';
export const AWARE_ACT = 'aware-act';
/** A purpose that equips someone to protect ("so hotel staff can spot the warning signs"): the one frame that cancels a trafficking request's reading. */
export const SAFEGUARD = 'safeguard';

/** Words after a person cared for that keep them the one cared for ("a friend who…", "my son about…"), not the one who acts. */
const CARED_FOR_NEXT = new Set(['who', 'that', 'about', 'through', 'after', 'when', 'whenev', 'if', 'sinc', 'becaus', 'dure', 'deal', 'cope', 'struggl']);
/** What a person cared for must not do right after being named: then they are the one who acts. */
const ACTS = ['harm', 'self-harm', 'injure'];

/** Whether an occurrence of `concept` starts at word `at`. */
function occursAt(found: Map<string, Occurrence[]>, concept: string, at: number): boolean {
  for (const o of found.get(concept) ?? NO_OCCURRENCES) if (o.start === at) return true;
  return false;
}

/** What the text itself says against a frame of care: secrecy, a body or self-harm to hide, a demand for the real thing. */
const AGAINST_CARE = ['covert', 'conceal-self', 'conceal-body', 'parents-unaware', 'realism'];
/** Words between "so" and the one equipped ("so that"), and how many words that one may have ("hotel staff"). */
const PURPOSE_LINKS = new Set(['that']);
const MOST_PURPOSE_WORDS = 3;
const ABLE = new Set(['can', 'could', 'will', 'would', 'know', 'learn', 'are', 'is', 'be', 'abl', 'how', 'to', 'better']);
/** The writer's own intent (a concept of the policy), and how many words after someone's reported words are theirs. */
const SELF_INTENT = 'self-intent';
const QUOTE_WORDS = 8;
/** The writer: a purpose of their own is no one else's protection. */
const WRITER = new Set(['i', 'we', 'me', 'us']);

/**
 * Frames of care, teaching and awareness, as structures (docs/policies.md, "How the embedded
 * moderation decides"). Adds to `found`:
 *
 * - someone else cared for: a verb of care and a person right after it who is not the one who
 *   acts ("support a friend who self-harms", "talk to my teenage son about the school
 *   shooting"; not "help my friend kill herself"), a frame of recovery and care; a child talked
 *   through something is also a frame of report (the news explained);
 * - someone else's words reported ("a friend keeps joking 'I want to die'"): a frame of care,
 *   and the wish quoted is not the writer's own intent;
 * - a purpose that equips someone to protect: "so" (or "so that"), a few words, an ability
 *   ("can", "will know how to") and an act of awareness ("spot the warning signs", "report
 *   it"): a frame of recovery, care, protection and report, and `safeguard`;
 * - teaching (a lesson plan, a unit on, my students) and official safety guidance ("what to do
 *   in case of"): a frame of care and of report, which reads what is named as a topic, never a
 *   weapon's making or an agent's release (those intents list neither).
 *
 * None holds when the text also asks for secrecy, for self-harm or a body to be hidden, or for
 * the real thing ("how do I self-harm without my friends noticing", "a fact sheet on how to
 * recruit victims without hotel staff noticing"). One pass over the concepts found: linear.
 */
export function readCare(tokens: Token[], found: Map<string, Occurrence[]>): boolean {
  // Every frame below begins at one of these: a text with none (most texts) has nothing to read.
  if (!holdsAny(found, CARE_OPENINGS) || holdsAny(found, AGAINST_CARE)) return false;
  const cared: Occurrence[] = [];
  const acting: Occurrence[] = [];
  const children: Occurrence[] = [];
  const safeguard: Occurrence[] = [];
  const people = personStarts(found);
  for (const v of found.get(CARE_VERB) ?? NO_OCCURRENCES) {
    let at = v.end;
    while (at < tokens.length && FREE.has(tokens[at]!.stem)) at++;
    let end = -1;
    let child = false;
    // "my teenage son": consecutive people are one.
    for (let p = people.get(at); p !== undefined; p = people.get(at)) {
      child ||= p.minor;
      end = at = p.end;
    }
    if (end < 0) continue;
    // "help my friend kill herself": the one "helped" acts, and the phrase is no frame of recovery.
    if (ACTS.some((c) => occursAt(found, c, end))) acting.push({ start: v.start, end: end + 1 });
    if (end < tokens.length && !CARED_FOR_NEXT.has(tokens[end]!.stem)) continue;
    cared.push({ start: v.start, end });
    // Talking a child or a class through the news: what is named is a topic.
    if (child) children.push({ start: v.start, end });
  }
  const reported: Occurrence[] = [];
  const said = found.get(REPORTED_SPEECH);
  if (said !== undefined) {
    const ends = new Set<number>();
    for (const p of people.values()) ends.add(p.end);
    // Someone else's words: a person at most two words before them ("a friend keeps joking", "my son always says").
    for (const o of said) {
      for (let k = 0; k <= 2 && o.start - k > 0; k++) {
        if (!ends.has(o.start - k)) continue;
        reported.push({ start: o.start - k - 1, end: o.end });
        break;
      }
    }
  }
  // What is quoted is the speaker's, not the writer's: "I want to die" right after "a friend keeps
  // joking" is no intent of the writer's (the reading of care, never of recovery: the writer may
  // still ask for a method, and that is refused). Only a wish is quoted so: what someone "told me
  // how to" do is instructions, and the frame holds none ("grandma always told me how to tie a noose").
  const intent = found.get(SELF_INTENT);
  if (intent === undefined) reported.length = 0;
  if (intent !== undefined && reported.length > 0) {
    // Both in text order: one walk over the two (a text of many quotes stays linear).
    let next = 0;
    let lastEnd = -Infinity;
    const quotes = new Set<number>();
    const own = intent.filter((o) => {
      while (next < reported.length && reported[next]!.end <= o.start) lastEnd = Math.max(lastEnd, reported[next++]!.end);
      if (o.start > lastEnd + QUOTE_WORDS) return true;
      quotes.add(lastEnd);
      return false;
    });
    // A report that quotes no wish frames nothing.
    const quoting = reported.filter((r) => quotes.has(r.end));
    reported.length = 0;
    reported.push(...quoting);
    if (own.length === 0) found.delete(SELF_INTENT);
    else found.set(SELF_INTENT, own);
  }
  for (const act of found.get(AWARE_ACT) ?? NO_OCCURRENCES) {
    // Back over the ability and the one equipped, to "so" ("so hotel staff can spot the warning signs").
    let at = act.start - 1;
    let able = 0;
    while (at >= 0 && able < 4 && ABLE.has(tokens[at]!.stem)) {
      at--;
      able++;
    }
    if (able === 0) continue;
    let words = 0;
    while (at >= 0 && words < MOST_PURPOSE_WORDS && tokens[at]!.stem !== 'so' && !PURPOSE_LINKS.has(tokens[at]!.stem)) {
      if (WRITER.has(tokens[at]!.stem) || NEGATIONS.has(tokens[at]!.stem)) break;
      at--;
      words++;
    }
    if (at >= 0 && PURPOSE_LINKS.has(tokens[at]!.stem)) at--;
    if (words === 0 || at < 0 || tokens[at]!.stem !== 'so') continue;
    safeguard.push({ start: at, end: act.end });
  }
  const topic = [...(found.get(TEACH_FRAME) ?? NO_OCCURRENCES), ...(found.get(SAFETY_FRAME) ?? NO_OCCURRENCES)];
  // A listed phrase of recovery ("help my friend") is none when the friend is the one who acts.
  const recovery = found.get(RECOVERY);
  if (recovery !== undefined && acting.length > 0) {
    const kept = recovery.filter((r) => !acting.some((a) => r.start < a.end && a.start < r.end));
    if (kept.length === 0) found.delete(RECOVERY);
    else found.set(RECOVERY, kept);
  }
  if (cared.length + reported.length + safeguard.length + topic.length === 0) return acting.length > 0;
  const add = (frame: string, list: readonly Occurrence[]) => {
    if (list.length > 0)
      found.set(
        frame,
        [...(found.get(frame) ?? []), ...list].sort((a, b) => a.start - b.start),
      );
  };
  // Someone else cared for is a frame of recovery and care (self-harm's), not of protection:
  // "my friend told me how to get a kid alone" protects nobody.
  add(RECOVERY, [...cared, ...safeguard]);
  add('care-frame', [...cared, ...reported, ...safeguard, ...topic]);
  add('protective', safeguard);
  add(SAFEGUARD, safeguard);
  add('report-frame', [...children, ...safeguard, ...topic]);
  return true;
}

/** The concepts a frame of care, report, awareness or teaching is read from (readCare). */
const CARE_OPENINGS = [CARE_VERB, REPORTED_SPEECH, AWARE_ACT, TEACH_FRAME, SAFETY_FRAME];

/** Whether any of `concepts` was found. */
function holdsAny(found: Map<string, Occurrence[]>, concepts: readonly string[]): boolean {
  for (const c of concepts) if (found.has(c)) return true;
  return false;
}

/** Where each person (or minor) occurrence starts → where it ends, and whether it is a minor. */
function personStarts(found: Map<string, Occurrence[]>): Map<number, { end: number; minor: boolean }> {
  const starts = new Map<number, { end: number; minor: boolean }>();
  for (const c of PEOPLE) {
    for (const p of found.get(c) ?? NO_OCCURRENCES) {
      const was = starts.get(p.start);
      starts.set(p.start, { end: Math.max(p.end, was?.end ?? 0), minor: (was?.minor ?? false) || c === 'minor' });
    }
  }
  return starts;
}
