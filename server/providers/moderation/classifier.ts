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
 * data) and classifier-model.bin (the weights, one signed byte each, bucket by
 * bucket). It is read at the first judgement, not at start, so an idle server
 * does not hold it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { featuresOf, type Features } from './features.ts';
import type { Vocabulary } from './normalize.ts';
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
}

export interface ClassifierModel extends ModelHeader {
  /** `weights[bucket * outputs.length + output]`. */
  weights: Int8Array;
}

/** The model in `dir`; throws when a file is missing or does not fit its header. */
export function readModel(dir = MODEL_DIR): ClassifierModel {
  const header = JSON.parse(fs.readFileSync(path.join(dir, MODEL_HEADER), 'utf8')) as ModelHeader;
  const bytes = fs.readFileSync(path.join(dir, MODEL_WEIGHTS));
  const expected = (1 << header.bits) * header.outputs.length;
  if (bytes.length !== expected) throw new Error(`${MODEL_WEIGHTS} holds ${bytes.length} bytes, its header says ${expected}`);
  return { ...header, weights: new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length) };
}

/** Each output's logit for a text's features. */
export function logits(model: ClassifierModel, features: Features): Float64Array {
  const k = model.outputs.length;
  const sums = new Float64Array(k);
  const { weights } = model;
  for (const bucket of features.buckets) {
    const at = bucket * k;
    for (let o = 0; o < k; o++) sums[o]! += weights[at + o]!;
  }
  for (let o = 0; o < k; o++) sums[o] = model.bias[o]! + sums[o]! * model.scales[o]! * features.value;
  return sums;
}

export const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

/** The model's reading of a text: how likely it is harmful, and the likeliest category if it is. */
export interface Judgement {
  harmful: number;
  category: string;
}

export function judge(model: ClassifierModel, text: string, vocabulary: Vocabulary): Judgement {
  const scores = logits(model, featuresOf(text, vocabulary, model.bits));
  let best = 1;
  for (let o = 2; o < scores.length; o++) if (scores[o]! > scores[best]!) best = o;
  return { harmful: sigmoid(scores[0]!), category: model.outputs[best]! };
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
  if (judged.harmful < model.threshold) return [];
  const c = policy.categories.find((x) => x.id === judged.category);
  return c !== undefined && policy.applies(c, preference) ? [c.id] : [];
}

/**
 * Whether the classifier is sure enough that a text is benign to overrule a rule that refuses
 * it: the ordinary uses of a frightening word that the rules' masks do not list ("a bomb-proof
 * chicken coop"). Validation chose the bound where this lowers false positives and costs no recall.
 */
export function overrules(model: ClassifierModel, judged: Judgement): boolean {
  return judged.harmful < model.overrule;
}

/** `learnedCategories` of `text`, read by the shipped model unless another is given. */
export function classifierCategories(policy: ModerationPolicy, text: string, preference: ContentPreference, model = shippedModel()): string[] {
  return learnedCategories(policy, model, judge(model, text, policy.vocabulary), preference);
}
