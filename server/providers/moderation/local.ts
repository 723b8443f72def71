/**
 * The embedded moderation provider: the categories of the policy file, matched
 * against the text as normalize.ts reads it. A category's terms match as whole
 * words; its patterns match the normalised words separated by single spaces;
 * its intents match the structure of a harmful request (intents.ts).
 */
import { setImmediate } from 'node:timers/promises';
import type { ModerationCategory, ModerationPolicy } from './policy-file.ts';
import { inDictionary, tokenize, type Token } from './normalize.ts';
import { stopWordDetector, type LanguageDetector } from './language.ts';
import { carries, maskedWords, occurrences, phrasesAt, START, type Intent, type Occurrence } from './intents.ts';
import { gloss } from './gloss.ts';
import { dropReflexives, HARMED_NOUN, maskNamedObjects, NAMED_OBJECT, readCare, readPurposes, THING } from './context.ts';
import { maskSenses } from './senses.ts';
import { secondReading } from './confusables.ts';
import { disarmFrames } from './frames.ts';
import { judge, learnedCategories, mayJudge, overrules, shippedModel, type ClassifierModel, type Judgement } from './classifier.ts';
import { frameFeatures, frameHarm, frameOverrules, shippedFrameModel, type FrameModel, type FrameReading } from './frame.ts';
import { MAX_FEATURE_CHARS } from './features.ts';
import type { ContentPreference, ModerationProvider, ModerationVerdict } from './types.ts';

/** Characters read between two turns of the event loop (one prompt's worth at most). */
const YIELD_AFTER_CHARS = 30_000;

/**
 * Words of the languages the detector places that are English words of the policy: German and
 * Dutch "die" (the, who), French "pour" (for). In a text placed in that language they are read as
 * its words, not the policy's ("was gehört in die Notfallbox?" is no wish to die); the gloss still
 * reads the text whole.
 */
const FALSE_FRIENDS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['de', new Set(['die'])],
  ['nl', new Set(['die'])],
  ['fr', new Set(['pour'])],
]);
const ALL_FALSE_FRIENDS: ReadonlySet<string> = new Set([...FALSE_FRIENDS.values()].flatMap((s) => [...s]));

/** A category's term as stems: what `termsHeld` looks for. */
interface IndexedTerm {
  category: string;
  stems: string[];
}

/**
 * The policy's terms by their first stem, and its intents by one concept each needs (not
 * `start`, which every text has, where it needs another): a text is matched only against
 * the terms its words begin and the intents whose concept it holds. Built once per policy (a
 * policy is read once, at start).
 */
interface PolicyIndex {
  terms: Map<string, IndexedTerm[]>;
  intents: Map<string, Array<{ category: ModerationCategory; intent: Intent }>>;
  /** Every category's patterns as one alternation: text it does not match matches none of them (undefined where they cannot be joined). */
  anyPattern: RegExp | undefined;
}

const indexes = new WeakMap<ModerationPolicy, PolicyIndex>();
const NO_INTENTS: ReadonlyArray<{ category: ModerationCategory; intent: Intent }> = [];

function indexOf(policy: ModerationPolicy): PolicyIndex {
  let index = indexes.get(policy);
  if (index === undefined) {
    index = { terms: new Map(), intents: new Map(), anyPattern: anyOf(policy.categories.flatMap((c) => c.patterns)) };
    for (const category of policy.categories) {
      for (const t of category.terms) {
        const list = index.terms.get(t.stems[0]!) ?? [];
        list.push({ category: category.id, stems: t.stems });
        index.terms.set(t.stems[0]!, list);
      }
      for (const intent of category.intents) {
        const needed = [...intent.seq, ...intent.all];
        const key = needed.find((c) => c !== START) ?? START;
        const list = index.intents.get(key) ?? [];
        list.push({ category, intent });
        index.intents.set(key, list);
      }
    }
    indexes.set(policy, index);
  }
  return index;
}

/**
 * One expression matching where any of `patterns` does, so that text none of them matches (nearly
 * every text) is scanned once rather than once per pattern; undefined when they cannot be
 * joined so: flags that differ, or groups referred to by number or name, which joining renumbers.
 */
function anyOf(patterns: readonly RegExp[]): RegExp | undefined {
  if (patterns.length < 2) return undefined;
  const flags = patterns[0]!.flags.replace(/[gy]/g, '');
  for (const p of patterns) if (p.flags.replace(/[gy]/g, '') !== flags || /\\[1-9k]|\(\?</.test(p.source)) return undefined;
  return new RegExp(patterns.map((p) => `(?:${p.source})`).join('|'), flags);
}

/**
 * The categories one of whose terms occurs with its words together, none of them inside a
 * benign mask: "build a bomb shelter" holds no "build a bomb", since its bomb is a shelter's;
 * "build a bomb for the shelter" does (the mask is only the words side by side). One pass over
 * the words, each looked up once by its stem, instead of one pass per term.
 */
function termsHeld(tokens: Token[], masked: boolean[], index: Map<string, IndexedTerm[]>): Set<string> {
  const held = new Set<string>();
  for (let i = 0; i < tokens.length; i++) {
    const starting = index.get(tokens[i]!.stem);
    if (starting === undefined || masked[i]) continue;
    outer: for (const { category, stems } of starting) {
      if (held.has(category) || i + stems.length > tokens.length) continue;
      for (let k = 1; k < stems.length; k++) if (tokens[i + k]!.stem !== stems[k] || masked[i + k]) continue outer;
      held.add(category);
    }
  }
  return held;
}

/** What the rules read of a text: where each concept occurs once masks, senses and frames are read, and which words are masked. */
export interface Reading {
  found: Map<string, Occurrence[]>;
  masked: boolean[];
}

/**
 * The concepts of `tokens` as the rules read them: masks, named objects, senses, reflexives,
 * purposes, frames of care and the frames a text disarms, in that order (what `categoriesOf`
 * matches intents against, and what the frame judge reads of a refused text).
 */
export function readConcepts(policy: ModerationPolicy, tokens: Token[]): Reading {
  const phrases = phrasesAt(tokens, policy.phrases);
  const masked = maskedWords(tokens, policy.phrases, phrases);
  let found = occurrences(tokens, policy.phrases, masked, phrases);
  // Words a named object makes harmless ("bomb shelter", "the container won't die") count for nothing.
  if (maskNamedObjects(tokens, found.get(NAMED_OBJECT), masked, found.get(THING), found.get(HARMED_NOUN), found.get('harm')))
    found = occurrences(tokens, policy.phrases, masked, phrases);
  // A trigger word in the field its text is about ("shoot … at golden hour", "bleed a tuna") counts for nothing.
  if (maskSenses(tokens, found, masked, policy.senses)) found = occurrences(tokens, policy.phrases, masked, phrases);
  // "self-harming, and the friend…": a reflexive compound's verb acts on no one after it.
  dropReflexives(tokens, found);
  // "so my teenager can't overdose": a purpose that protects someone is a frame of recovery.
  readPurposes(tokens, found);
  // Someone else cared for, a class taught, official safety guidance: frames of care and report.
  readCare(tokens, found);
  // A made-up world cancels nothing when the text demands that its content be real.
  disarmFrames(found);
  return { found, masked };
}

/** The ids of the categories that apply to `preference` and that `text` breaks (a term, a pattern or an intent of theirs). */
export function categoriesOf(policy: ModerationPolicy, text: string, preference: ContentPreference, tokens = tokenize(text, policy.vocabulary)): string[] {
  const index = indexOf(policy);
  const { found, masked } = readConcepts(policy, tokens);
  const broken = termsHeld(tokens, masked, index.terms);
  for (const concept of found.keys()) {
    for (const { category, intent } of index.intents.get(concept) ?? NO_INTENTS) {
      if (broken.has(category.id) || !policy.applies(category, preference)) continue;
      if (carries(tokens, found, intent)) broken.add(category.id);
    }
  }
  let spaced: string | undefined;
  let anyPattern: boolean | undefined;
  const ids: string[] = [];
  for (const c of policy.categories) {
    if (!policy.applies(c, preference)) continue;
    if (!broken.has(c.id) && c.patterns.length > 0) {
      spaced ??= tokens.map((t) => t.word).join(' ');
      anyPattern ??= index.anyPattern === undefined || index.anyPattern.test(spaced);
      if (anyPattern)
        for (const p of c.patterns) {
          if (!p.test(spaced)) continue;
          broken.add(c.id);
          break;
        }
    }
    if (broken.has(c.id)) ids.push(c.id);
  }
  return ids;
}

/** Whether a text holds a word that some language the detector places reads as its own (FALSE_FRIENDS). */
function holdsFalseFriend(tokens: readonly Token[]): boolean {
  for (const t of tokens) if (ALL_FALSE_FRIENDS.has(t.word)) return true;
  return false;
}

/** Whether the rules' `found` categories stand: some found, and no classifier (`judged`: its reading, made when `model` is) overrules them. */
function stands(found: string[], model: ClassifierModel | undefined, judged: Judgement | undefined): boolean {
  return found.length > 0 && (model === undefined || !overrules(model, judged!, found));
}

/**
 * Whether the frame judge overrules a refusal for `found` of `text` (read only on this path: an
 * everyday prompt, which nothing refuses, never reaches it). Never one that `read`, the words the
 * refusal was read from, makes by a term or pattern. `judged` is the classifier's reading, made
 * for every refusal when `model` is.
 */
function framed(
  policy: ModerationPolicy,
  option: FrameModel | false | undefined,
  model: ClassifierModel | undefined,
  judged: Judgement | undefined,
  text: string,
  language: string | undefined,
  found: string[],
  read?: Token[],
): boolean {
  if (option === false || model === undefined || judged === undefined || (read !== undefined && holdsTerm(policy, read))) return false;
  // The shipped judge is read at the first refusal it reviews, not at start.
  const frame = option ?? shippedFrameModel();
  const harm = frameHarm(frame, frameFeatures(frameReadings(policy, text, language), frame.bits));
  return frameOverrules(frame, harm, judged.harmful, found);
}

/**
 * Whether `tokens` hold one of the policy's terms or patterns, which name what is harmful in any
 * frame ("sieg heil", a slur): a refusal they make is never the frame judge's to overrule.
 */
export function holdsTerm(policy: ModerationPolicy, tokens: Token[]): boolean {
  const index = indexOf(policy);
  if (termsHeld(tokens, readConcepts(policy, tokens).masked, index.terms).size > 0) return true;
  const spaced = tokens.map((t) => t.word).join(' ');
  return policy.categories.some((c) => c.patterns.some((p) => p.test(spaced)));
}

/**
 * What the frame judge reads of `text` (frame.ts): its words (as many as the classifier reads) with
 * the rules' concepts of them, and its gloss's when `language` (or the look of its words) has one.
 */
export function frameReadings(policy: ModerationPolicy, text: string, language: string | undefined): FrameReading[] {
  const tokens = tokenize(text.length > MAX_FEATURE_CHARS ? text.slice(0, MAX_FEATURE_CHARS) : text, policy.vocabulary);
  const readings: FrameReading[] = [{ tokens, ...readConcepts(policy, tokens) }];
  const english = gloss(text, language, (w) => policy.vocabulary.isWord(w));
  if (english !== undefined) {
    const glossed = tokenize(english.length > MAX_FEATURE_CHARS ? english.slice(0, MAX_FEATURE_CHARS) : english, policy.vocabulary);
    readings.push({ tokens: glossed, ...readConcepts(policy, glossed) });
  }
  return readings;
}

/**
 * The embedded provider. Its concepts are English: a text that `languages` reads as another
 * language and that breaks nothing is returned as unjudged (policies.md, "Other languages").
 * What the rules pass, the learned classifier judges too, and what they refuse it may overrule
 * when it is confident the text is benign (classifier.ts; `classifier: false` leaves the rules
 * alone, as the training's validation measures them).
 */
export function embeddedModeration(
  policy: ModerationPolicy,
  languages: LanguageDetector = stopWordDetector(inDictionary),
  options: { classifier?: ClassifierModel | false; frame?: FrameModel | false } = {},
): ModerationProvider {
  const classifier = options.classifier;
  // The frame judge reviews refusals beside the classifier: rules alone (`classifier: false`) are reviewed by nothing.
  const frameOption = classifier === false ? false : options.frame;
  // Made once per provider, not per text (every submission is moderated here).
  const isEnglish = (word: string) => policy.vocabulary.isWord(word); // knows() or the dictionary, remembered
  return {
    name: 'embedded',
    async moderate({ texts, preference }) {
      let since = 0;
      let unjudged: ModerationVerdict['unjudged'];
      for (const { field, text } of texts) {
        // A conversation holds up to 128,000 characters: other requests get a turn between
        // its messages instead of waiting for the whole of it.
        if (since >= YIELD_AFTER_CHARS) {
          await setImmediate();
          since = 0;
        }
        since += text.length;
        // The classifier reads each text once, when first asked: to overrule a rule or to judge what they pass.
        const model = classifier === false ? undefined : (classifier ?? shippedModel());
        let judged: Judgement | undefined;
        const tokens = tokenize(text, policy.vocabulary);
        let categories = categoriesOf(policy, text, preference, tokens);
        // Asked once, when first needed: a refusal whose words may be another language's, or a pass.
        let placed = false;
        let language: string | undefined;
        if (categories.length > 0 && holdsFalseFriend(tokens)) {
          language = languages.detect(text);
          placed = true;
          const friends = FALSE_FRIENDS.get(language ?? '');
          // German "die" is "the": in a text read as German it is no English word (the gloss reads it).
          if (friends !== undefined)
            categories = categoriesOf(
              policy,
              text,
              preference,
              tokens.map((t) => (friends.has(t.word) ? { ...t, stem: `#${t.word}` } : t)),
            );
        }
        if (categories.length > 0 && model !== undefined) judged ??= judge(model, text, policy.vocabulary, tokens);
        if (
          stands(categories, model, judged) &&
          !framed(policy, frameOption, model, judged, text, placed ? language : languages.detect(text), categories, tokens)
        )
          return { provider: 'embedded', flagged: { field, categories } };
        // A look-alike with two readings ("smуggling"): the second is judged too.
        const second = secondReading(text);
        const secondTokens = second === undefined ? [] : tokenize(second, policy.vocabulary);
        const reread = second === undefined ? [] : categoriesOf(policy, second, preference, secondTokens);
        if (reread.length > 0 && model !== undefined) judged ??= judge(model, text, policy.vocabulary, tokens);
        if (
          stands(reread, model, judged) &&
          !framed(policy, frameOption, model, judged, text, placed ? language : languages.detect(text), reread, secondTokens)
        )
          return { provider: 'embedded', flagged: { field, categories: reread } };
        if (!placed) language = languages.detect(text);
        // Another language is read through its glossary: what that finds is refused; what it
        // does not stays unjudged, since a word-for-word reading is no judgment of the whole.
        const english = gloss(text, language, isEnglish);
        const englishTokens = english === undefined ? [] : tokenize(english, policy.vocabulary);
        const glossed = english === undefined ? [] : categoriesOf(policy, english, preference, englishTokens);
        if (glossed.length > 0 && model !== undefined) judged ??= judge(model, text, policy.vocabulary, tokens);
        if (stands(glossed, model, judged) && !framed(policy, frameOption, model, judged, text, language, glossed, englishTokens))
          return { provider: 'embedded', flagged: { field, categories: glossed } };
        const opens = model !== undefined && mayJudge(model, tokens, language !== undefined || english !== undefined, englishTokens);
        if (opens) judged ??= judge(model, text, policy.vocabulary, tokens);
        const learned = opens ? learnedCategories(policy, model, judged!, preference) : [];
        if (learned.length > 0 && !framed(policy, frameOption, model, judged, text, language, learned))
          return { provider: 'embedded', flagged: { field, categories: learned } };
        if (unjudged === undefined && language !== undefined) unjudged = { field, language };
      }
      return { provider: 'embedded', flagged: undefined, unjudged };
    },
  };
}
