/**
 * The frame judge: a learned review of every refusal of the embedded policy (by a rule or by
 * the classifier) that may overrule it when it is confident the text is benign
 * (docs/policies.md, "The frame judge").
 *
 * The rules and the classifier refuse ordinary uses of frightening words: a harm named in a frame
 * of care, teaching, news, law or safety, a game's or a garden's slang, a program's words. Cues
 * written for each new set's phrasings did not carry to the next set; what does carry is the
 * frame itself, so this model reads what the rules read of it rather than a list of phrasings:
 *
 * - the concepts the rules found, after masks, senses and frames (`readConcepts` in local.ts:
 *   `care-frame`, `teach-frame`, `report-frame`, `request`, `howto-demand`, `self-intent`,
 *   `person`, `harm` …), alone and as neighbours in the order they occur ("harm" then
 *   "person" within a few words: a verb of harm with a person as its object);
 * - how the text opens (its first two stems: who asks, and whether it asks "how do I"),
 *   and whether some word was masked (an object-compound reading: "bomb shelter", "X-proof");
 * - the stems, alone, side by side and one word apart.
 *
 * It is a logistic regression trained on every labelled set (harmful requests against benign
 * text), and it judges only a text already refused: an everyday prompt, which nothing refuses,
 * never reads it. A refusal stands unless the geometric mean of its harmful probability and the
 * classifier's is under the `bound` leave-one-set-out validation chose (`frameOverrules`), and a
 * refusal for sexual content with minors, or for a category the model was not trained on (the
 * strict ones), always stands.
 *
 * The model is two files beside this module: frame-model.json (bias, scale, bound, the
 * training data's checksum) and frame-model.bin (one signed byte per bucket), read at the first
 * review, not at start.
 */
import fs from 'node:fs';
import path from 'node:path';
import { bucketOf, hashString, MAX_FEATURE_WORDS, step, type Features } from './features.ts';
import type { Occurrence } from './intents.ts';
import type { Token } from './normalize.ts';

export const FRAME_HEADER = 'frame-model.json';
export const FRAME_WEIGHTS = 'frame-model.bin';

/** Categories whose refusal the frame judge never overrules, however benign a text reads to it. */
export const NEVER_OVERRULED: ReadonlySet<string> = new Set(['sexual-minors']);

/** What frame-model.json holds. */
export interface FrameHeader {
  /** log2 of the number of hash buckets. */
  bits: number;
  bias: number;
  /** A weight is its byte times this. */
  scale: number;
  /** The harmful probability under which a refusal is overruled (0: never). */
  bound: number;
  /** The categories it may overrule a refusal for (those it was trained on, less NEVER_OVERRULED). */
  categories: string[];
  /** SHA-256 of the training sets, options and feature reader (scripts/moderation/frame-train.ts). */
  trainingChecksum: string;
  /** How it was trained, for the record. */
  training: Record<string, unknown>;
}

export interface FrameModel extends FrameHeader {
  weights: Int8Array;
  /** `categories` as a set. */
  categorySet: ReadonlySet<string>;
}

/** What the frame judge reads of a text: its tokens and the rules' concepts of them. */
export interface FrameReading {
  tokens: readonly Token[];
  found: ReadonlyMap<string, readonly Occurrence[]>;
  masked: readonly boolean[];
}

/** Seeds that keep the kinds of feature apart in the hash space. */
const WORD = 0x27d4eb2f;
const PAIR = 0x165667b1;
const SKIP = 0xd3a2646c;
const OPEN = 0xfd7046c5;
const CONCEPT = 0xb55a4f09;
const NEXT = 0x68e31da4;
const MASKED = 0x1b873593;

/** How many words apart two concepts may be to count as neighbours ("poison my husband": harm, person). */
const NEIGHBOURS = 3;

/** The frame features of one reading (several readings of one text, e.g. its gloss, add theirs into `out`). */
function addReading(out: number[], r: FrameReading, mask: number): void {
  const n = Math.min(r.tokens.length, MAX_FEATURE_WORDS);
  const stems = r.tokens.slice(0, n).map((t) => t.stem);
  const hashes = stems.map((s) => hashString(WORD, s));
  for (let i = 0; i < n; i++) {
    out.push(bucketOf(hashes[i]!, mask));
    if (i > 0) out.push(bucketOf(hashString(step(hashes[i - 1]! ^ PAIR, 32), stems[i]!), mask));
    if (i > 1) out.push(bucketOf(hashString(step(hashes[i - 2]! ^ SKIP, 32), stems[i]!), mask));
  }
  out.push(bucketOf(hashString(OPEN, stems.slice(0, 2).join(' ')), mask));
  if (r.masked.some((m) => m)) out.push(bucketOf(MASKED, mask));
  const at: Array<{ concept: string; start: number; end: number }> = [];
  for (const [concept, list] of r.found) {
    if (list.length === 0 || concept === 'start') continue;
    out.push(bucketOf(hashString(CONCEPT, concept), mask));
    for (const o of list) if (o.start < n) at.push({ concept, start: o.start, end: o.end });
  }
  at.sort((a, b) => a.start - b.start || a.end - b.end);
  for (let i = 0; i < at.length; i++)
    for (let k = i + 1; k < at.length && at[k]!.start - at[i]!.end <= NEIGHBOURS; k++)
      if (at[k]!.concept !== at[i]!.concept) out.push(bucketOf(hashString(NEXT, `${at[i]!.concept}>${at[k]!.concept}`), mask));
}

/** The hashed frame features of a text's readings (its own, and its gloss's when it has one). */
export function frameFeatures(readings: readonly FrameReading[], bits: number): Features {
  const out: number[] = [];
  const mask = (1 << bits) - 1;
  for (const r of readings) addReading(out, r, mask);
  const sorted = Uint32Array.from(out).sort();
  let distinct = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[distinct++] = sorted[i]!;
  const words = readings.reduce((m, r) => Math.max(m, Math.min(r.tokens.length, MAX_FEATURE_WORDS)), 0);
  return { buckets: sorted.subarray(0, distinct), value: distinct === 0 ? 0 : 1 / Math.sqrt(distinct), words };
}

/** The frame judge's harmful probability for a text's features. */
export function frameHarm(model: Pick<FrameModel, 'weights' | 'bias' | 'scale'>, features: Features): number {
  let sum = 0;
  for (const b of features.buckets) sum += model.weights[b]!;
  return 1 / (1 + Math.exp(-(model.bias + sum * model.scale * features.value)));
}

/**
 * Whether the judge overrules a refusal for `categories` of a text: the geometric mean of its
 * harmful probability (`harm`) and the classifier's (`classifierHarm`) under the bound. The two
 * read different things (the frame, the words and grams), and validation found their agreement
 * a safer sign of benign text than either alone: the judge alone overruled requests in other
 * languages and spaced or fullwidth letters, whose grams the classifier reads and it does not.
 */
export function frameOverrules(model: Pick<FrameModel, 'bound' | 'categorySet'>, harm: number, classifierHarm: number, categories: readonly string[]): boolean {
  return Math.sqrt(harm * classifierHarm) < model.bound && categories.every((c) => model.categorySet.has(c));
}

/** The frame model in `dir`; throws when a file is missing or does not fit its header. */
export function readFrameModel(dir = import.meta.dirname): FrameModel {
  const header = JSON.parse(fs.readFileSync(path.join(dir, FRAME_HEADER), 'utf8')) as FrameHeader;
  const bytes = fs.readFileSync(path.join(dir, FRAME_WEIGHTS));
  if (bytes.length !== 1 << header.bits) throw new Error(`${FRAME_WEIGHTS} holds ${bytes.length} bytes, its header says ${1 << header.bits}`);
  return {
    ...header,
    weights: new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length),
    categorySet: new Set(header.categories.filter((c) => !NEVER_OVERRULED.has(c))),
  };
}

let shipped: FrameModel | undefined;

/** The shipped frame model, read once, at the first review. */
export function shippedFrameModel(): FrameModel {
  shipped ??= readFrameModel();
  return shipped;
}
