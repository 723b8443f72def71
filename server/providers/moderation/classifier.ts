/**
 * The learned judge of the embedded policy: a linear model over hashed features
 * (features.ts), trained by `npm run train:moderation` on the labelled sets of
 * test/fixtures/moderation/ (docs/policies.md, "The learned classifier").
 *
 * Hand-written rules catch the phrasings someone wrote down; the model adds
 * what they have in common. It has one output that says whether a text is a
 * harmful request (a logistic regression: its probability against the
 * threshold the training chose by leave-one-set-out validation) and one per
 * policy category, which only names the category of a text found harmful. A
 * text the model finds almost surely benign overrules the rules' refusal, under
 * a bound the same validation chose.
 *
 * The model is two files beside this module: classifier-model.json (the
 * header: outputs, biases, scales, threshold, the checksum of the training
 * data) and classifier-model.bin (the weights, one signed byte each, output by
 * output). It is read at the first judgement, not at start, so an idle server
 * does not hold it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { featuresOf, MAX_FEATURE_WORDS, MIN_JUDGED_WORDS, textFeatures, type Features } from './features.ts';
import type { Token, Vocabulary } from './normalize.ts';
import type { ModerationPolicy } from './policy-file.ts';
import type { ContentPreference } from './types.ts';

/** The output that says whether a text is harmful; the others are policy category ids. */
export const HARMFUL = 'harmful';

export const MODEL_DIR = import.meta.dirname;
export const MODEL_HEADER = 'classifier-model.json';
export const MODEL_WEIGHTS = 'classifier-model.bin';

/** What classifier-model.json holds. */
export interface ModelHeader {
  /** log2 of the number of hash buckets. */
  bits: number;
  /** `harmful`, then the policy category ids, in the order of each bucket's weights. */
  outputs: string[];
  bias: number[];
  /** Per output: a weight is its byte times this. */
  scales: number[];
  /** The harmful probability at or above which a text is refused. */
  threshold: number;
  /** The harmful probability under which a rule's refusal is overruled (0: never). */
  overrule: number;
  /** SHA-256 of the training sets and options the weights were trained from (scripts/moderation/train.ts). */
  trainingChecksum: string;
  /** How it was trained (seed, epochs, …), for the record. */
  training: Record<string, unknown>;
  /**
   * The gate: the stems of which an English text must hold one for the classifier to judge it
   * (`mayJudge`); absent, it judges every text.
   */
  signals?: string[];
  /**
   * The gate's weaker stems: words harmful requests use more than benign text does, but too
   * commonly in plain English ("people", "plan", "method") to open it alone; an English text
   * must hold two distinct ones (or one of `signals`).
   */
  pairedSignals?: string[];
  /**
   * The gate for a text read as another language: the stems (of its own words or of its gloss)
   * of which it must hold one, or an English signal; absent, every such text is judged.
   */
  foreignSignals?: string[];
}

export interface ClassifierModel extends ModelHeader {
  /** `weights[output * 2^bits + bucket]`: an output's weights together, so the harmful one alone is read for most texts. */
  weights: Int8Array;
  /** `signals` as a set. */
  signalSet?: ReadonlySet<string>;
  /** `pairedSignals` as a set. */
  pairedSet?: ReadonlySet<string>;
  /** `foreignSignals` as a set. */
  foreignSet?: ReadonlySet<string>;
}

/** The model in `dir`; throws when a file is missing or does not fit its header. */
export function readModel(dir = MODEL_DIR): ClassifierModel {
  const header = JSON.parse(fs.readFileSync(path.join(dir, MODEL_HEADER), 'utf8')) as ModelHeader;
  const bytes = fs.readFileSync(path.join(dir, MODEL_WEIGHTS));
  const expected = (1 << header.bits) * header.outputs.length;
  if (bytes.length !== expected) throw new Error(`${MODEL_WEIGHTS} holds ${bytes.length} bytes, its header says ${expected}`);
  return {
    ...header,
    weights: new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length),
    signalSet: header.signals && new Set(header.signals),
    pairedSet: header.pairedSignals && new Set(header.pairedSignals),
    foreignSet: header.foreignSignals && new Set(header.foreignSignals),
  };
}

/**
 * The gate in front of the classifier: it judges an English text only when one of its first
 * MAX_FEATURE_WORDS words is a signal stem (a stem training found far more often in harmful
 * requests than in benign text, and seldom in benign text at all: "gun", "nude", "vermin"…),
 * or two distinct ones are paired signals (found more often in harmful requests, but too
 * common a word to say much alone: "people", "plan").
 * Text with no word the harmful requests are made of — test names, logs, documentation, most
 * everyday prompts — is text unlike anything the model learned from, and there its guesses were
 * the false positives (docs/policies.md, "The learned classifier"); it is also skipped unread.
 *
 * A text in another language (`foreign`: read as one, or glossed) holds few English stems, so
 * its own gate is read: a foreign signal among its words or those of its gloss (`glossed`: the
 * policy's concepts in that language), or an English signal. The model's grams of most languages
 * come from a few hundred texts and mostly say which language a text is in: judged on them alone,
 * a shopping list in Portuguese was refused. A model without foreign signals judges every such text.
 */
export function mayJudge(
  model: Pick<ClassifierModel, 'signalSet' | 'pairedSet' | 'foreignSet'>,
  tokens: readonly Pick<Token, 'stem'>[],
  foreign: boolean,
  glossed: readonly Pick<Token, 'stem'>[] = [],
): boolean {
  const signals = model.signalSet;
  if (signals === undefined) return true;
  const own = foreign ? model.foreignSet : undefined;
  if (foreign && own === undefined) return true;
  const paired = model.pairedSet;
  let first: string | undefined;
  for (const list of [tokens, glossed]) {
    const n = Math.min(list.length, MAX_FEATURE_WORDS);
    for (let i = 0; i < n; i++) {
      const stem = list[i]!.stem;
      if (signals.has(stem) || own?.has(stem)) return true;
      if (paired === undefined || !paired.has(stem)) continue;
      if (first !== undefined && first !== stem) return true;
      first = stem;
    }
  }
  return false;
}

/** Output `o`'s logit for a text's features. */
export function logit(model: ClassifierModel, features: Features, o: number): number {
  const { weights } = model;
  const at = o << model.bits;
  let sum = 0;
  for (const bucket of features.buckets) sum += weights[at + bucket]!;
  return model.bias[o]! + sum * model.scales[o]! * features.value;
}

export const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

/** The model's reading of a text: how likely it is a harmful request, and the features it read. */
export interface Judgement {
  harmful: number;
  features: Features;
}

/** Judges `text`; `tokens` are its tokens as the rules read them (read here when not given). */
export function judge(model: ClassifierModel, text: string, vocabulary: Vocabulary, tokens?: readonly Token[]): Judgement {
  const features = tokens === undefined ? textFeatures(text, vocabulary, model.bits) : featuresOf(text, tokens, model.bits);
  return { harmful: sigmoid(logit(model, features, 0)), features };
}

/** The likeliest category of a text judged harmful (its category outputs are read only then). */
export function likeliestCategory(model: ClassifierModel, features: Features): string {
  let best = 1;
  let bestLogit = -Infinity;
  for (let o = 1; o < model.outputs.length; o++) {
    const z = logit(model, features, o);
    if (z > bestLogit) [best, bestLogit] = [o, z];
  }
  return model.outputs[best]!;
}

let shipped: ClassifierModel | undefined;

/** The shipped model, read once, at the first call. */
export function shippedModel(): ClassifierModel {
  shipped ??= readModel();
  return shipped;
}

/**
 * The categories the classifier refuses a text for: the likeliest one when the text is harmful
 * and that category is in the policy and applies to `preference`; none otherwise (a policy file
 * without the model's category cannot be broken by it).
 */
export function learnedCategories(policy: ModerationPolicy, model: ClassifierModel, judged: Judgement, preference: ContentPreference): string[] {
  if (judged.features.words < MIN_JUDGED_WORDS || judged.harmful < model.threshold) return [];
  const category = likeliestCategory(model, judged.features);
  const c = policy.categories.find((x) => x.id === category);
  return c !== undefined && policy.applies(c, preference) ? [c.id] : [];
}

/**
 * Whether the classifier is sure enough that a text is benign to overrule the rules' refusal
 * for `categories`: the ordinary uses of a frightening word that the rules' masks do not list.
 * Validation chose the bound where this lowers false positives and lets no harmful text through.
 * Only a refusal for categories the model was trained on: it knows nothing of the strict ones
 * (`sexual`, `graphic-violence`), so "a gory battlefield painting" stays refused for a strict account.
 */
export function overrules(model: ClassifierModel, judged: Judgement, categories: readonly string[]): boolean {
  return judged.harmful < model.overrule && categories.every((c) => model.outputs.includes(c));
}

/** `learnedCategories` of `text`, read by the shipped model unless another is given. */
export function classifierCategories(policy: ModerationPolicy, text: string, preference: ContentPreference, model = shippedModel()): string[] {
  return learnedCategories(policy, model, judge(model, text, policy.vocabulary), preference);
}
