/**
 * How the moderation classifier (server/providers/moderation/classifier.ts) is
 * trained: every labelled set under test/fixtures/moderation/ (sub-folders
 * included), its features hashed as the server hashes them, and a logistic
 * regression per output fitted by stochastic gradient descent with AdaGrad
 * step sizes and an L2 penalty, in an order a seeded generator shuffles, so the
 * same data and options give the same weights byte for byte. Shared by
 * `npm run train:moderation` and the test that checks the shipped model.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { featuresOf, MAX_FEATURE_CHARS, MAX_FEATURE_WORDS, type Features } from '../../server/providers/moderation/features.ts';
import { gloss } from '../../server/providers/moderation/gloss.ts';
import { ENGLISH_FUNCTION_WORDS, OTHER_FUNCTION_WORDS, stopWordDetector } from '../../server/providers/moderation/language.ts';
import { HARMFUL, type ClassifierModel } from '../../server/providers/moderation/classifier.ts';
import { inDictionary, stemOf, tokenize, type Vocabulary } from '../../server/providers/moderation/normalize.ts';
import { rng } from '../../server/providers/random.ts';
import { readSet, SETS_DIR, type LabelledSet } from './eval-set.ts';

/** The policy category each set's harmful group stands for. */
export const GROUP_CATEGORY: ReadonlyMap<string, string> = new Map([
  ['violence-weapons', 'violence'],
  ['murder-assault', 'violence'],
  ['cbrn', 'weapons-cbrn'],
  ['terrorism', 'terrorism'],
  ['self-harm', 'self-harm'],
  ['sexual-minors', 'sexual-minors'],
  ['hate', 'hate'],
  ['trafficking', 'trafficking'],
]);

export const CATEGORIES = [...new Set(GROUP_CATEGORY.values())];
export const OUTPUTS = [HARMFUL, ...CATEGORIES];

export interface TrainingOptions {
  bits: number;
  epochs: number;
  seed: number;
  /** AdaGrad's base step. */
  rate: number;
  /** L2 penalty per step on the weights a sample touches. */
  l2: number;
  /** How much a benign sample's loss weighs against a harmful one's (false positives cost trust). */
  benignWeight: number;
  /** The gate's signal stems: in at least this many harmful texts… */
  signalMin: number;
  /** …and this many times as frequent (per text) in harmful texts as in benign ones (`signalStems`)… */
  signalRatio: number;
  /** …and, to open the gate alone, in at most this share of the benign texts (1: any)… */
  signalShare: number;
  /** …or, to open it with a second such stem, in at most this share (0: no paired signals). */
  pairedShare: number;
  /**
   * A text in another language opens the gate only on a stem of its own words or of its gloss
   * found in at least `signalMin` harmful texts of other languages, `signalRatio` times as often
   * per text as in their benign ones, and in at most this share of those benign texts (or on an
   * English signal). Absent: every such text opens it, as before.
   */
  foreignShare?: number;
}

export const DEFAULT_OPTIONS: TrainingOptions = {
  bits: 17,
  epochs: 12,
  seed: 42,
  rate: 0.4,
  l2: 1e-5,
  benignWeight: 1.5,
  signalMin: 3,
  signalRatio: 3,
  signalShare: 0.001,
  pairedShare: 0.002,
  foreignShare: 0.01,
};

/** The options that shape the gate alone (the weights do not depend on them). */
export type GateOptions = Pick<TrainingOptions, 'signalMin' | 'signalRatio' | 'signalShare' | 'pairedShare' | 'foreignShare'>;

/** Every set file under `dir`, sub-folders included, by path relative to it, sorted. */
export function trainingFiles(dir = SETS_DIR): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => f.split(path.sep).join('/'))
    .sort();
}

export function readTrainingSets(dir = SETS_DIR): LabelledSet[] {
  return trainingFiles(dir).map((f) => {
    const set = readSet(path.join(dir, f));
    for (const s of set.samples) if (s.harmful && !GROUP_CATEGORY.has(s.group)) throw new Error(`${f}: harmful group ${s.group} names no policy category`);
    return { ...set, name: f.replace(/\.yaml$/, '') };
  });
}

/**
 * SHA-256 over the training files (path and text), the options and the feature reader's source
 * (a change to how a text is read needs a retrained model as much as a change to the sets):
 * what the shipped model's header records.
 */
/** The module that reads a text into features (server and training share it). */
const FEATURES_SOURCE = path.join(import.meta.dirname, '../../server/providers/moderation/features.ts');

export function trainingChecksum(options: TrainingOptions, dir = SETS_DIR): string {
  return setsChecksum(options, FEATURES_SOURCE, dir);
}

/** SHA-256 over the training files of `dir`, a model's `options` and the `source` module that reads its features. */
export function setsChecksum(options: object, source: string, dir = SETS_DIR): string {
  const hash = crypto.createHash('sha256');
  for (const f of trainingFiles(dir))
    hash
      .update(`${f}\n`)
      .update(fs.readFileSync(path.join(dir, f)))
      .update('\n');
  hash.update(JSON.stringify(options));
  hash.update(fs.readFileSync(source));
  return hash.digest('hex');
}

/** A sample as training reads it: its features and, per output, its label (undefined: not trained on). */
export interface Encoded {
  features: Features;
  harmful: boolean;
  category: string | undefined;
  /** Its distinct stems, as the gate reads them (the first MAX_FEATURE_WORDS words, and those of its gloss). */
  stems: string[];
  /** Whether the embedded provider reads it as another language (detected, or glossed): the gate lets it through. */
  foreign: boolean;
}

export function encode(set: LabelledSet, vocabulary: Vocabulary, bits: number): Encoded[] {
  const languages = stopWordDetector(inDictionary);
  return set.samples.map((s) => {
    const head = s.text.slice(0, MAX_FEATURE_CHARS);
    const tokens = tokenize(head, vocabulary);
    const language = languages.detect(s.text);
    const english = gloss(s.text, language, (w) => vocabulary.isWord(w));
    // The gloss's words as the server's gate reads them (local.ts): the policy's concepts in that language.
    const glossed = english === undefined ? [] : tokenize(english.slice(0, MAX_FEATURE_CHARS), vocabulary).slice(0, MAX_FEATURE_WORDS);
    return {
      features: featuresOf(head, tokens, bits),
      harmful: s.harmful,
      category: s.harmful ? GROUP_CATEGORY.get(s.group) : undefined,
      stems: [...new Set([...tokens.slice(0, MAX_FEATURE_WORDS), ...glossed].map((t) => t.stem))],
      foreign: language !== undefined || english !== undefined,
    };
  });
}

/** Per stem, in how many harmful and benign training texts it is (`[harmful, benign]`), and of how many. */
export interface Counts {
  counts: Map<string, [number, number]>;
  harmful: number;
  benign: number;
}

/** The stem counts of the English training texts, and apart those of the texts read as another language. */
export interface StemCounts extends Counts {
  foreign: Counts;
}

const emptyCounts = (): Counts => ({ counts: new Map(), harmful: 0, benign: 0 });

/** The stem counts of `samples`: English texts and texts read as another language apart (each has its gate). */
export function stemCounts(samples: readonly Encoded[]): StemCounts {
  const english = emptyCounts();
  const foreign = emptyCounts();
  for (const s of samples) {
    const c = s.foreign ? foreign : english;
    if (s.harmful) c.harmful++;
    else c.benign++;
    for (const stem of s.stems) {
      const n = c.counts.get(stem) ?? [0, 0];
      n[s.harmful ? 0 : 1]++;
      c.counts.set(stem, n);
    }
  }
  return { ...english, foreign };
}

function without(all: Counts, part: Counts): Counts {
  const counts = new Map<string, [number, number]>();
  for (const [stem, [h, b]] of all.counts) {
    const [ph, pb] = part.counts.get(stem) ?? [0, 0];
    if (h - ph > 0 || b - pb > 0) counts.set(stem, [h - ph, b - pb]);
  }
  return { counts, harmful: all.harmful - part.harmful, benign: all.benign - part.benign };
}

/** `all` less `part` (a set left out of training, for its validation model's gate). */
export function withoutCounts(all: StemCounts, part: StemCounts): StemCounts {
  return { ...without(all, part), foreign: without(all.foreign, part.foreign) };
}

/** The gate's stems: those that open it alone, and those that open it only in twos (classifier.ts, `mayJudge`). */
export interface Gate {
  signals: string[];
  pairedSignals: string[];
  /** The stems that open it for a text read as another language (`foreignShare`; absent: every such text opens it). */
  foreignSignals?: string[];
}

/** Words of any request, beside English's function words, that training found more often in harmful ones. */
const REQUEST_WORDS = 'him get want need way tell like just look sure much lot onto via pls dont cant wont ive youd hes okay'.split(' ');
// A request's function words ("to", "how", "we", "make") are more frequent in the sets' harmful
// requests than in their benign text, yet say nothing of harm: "from here to there" opened the gate.
const NO_SIGNAL: ReadonlySet<string> = new Set([...ENGLISH_FUNCTION_WORDS, ...REQUEST_WORDS].map(stemOf));
/** The function words of the other languages the detector knows: they say which language, not what about. */
const NO_FOREIGN_SIGNAL: ReadonlySet<string> = new Set([...NO_SIGNAL, ...OTHER_FUNCTION_WORDS.map(stemOf)]);

/**
 * The gate's stems (classifier.ts, `mayJudge`) from the stem counts of English training texts:
 * those found in at least `signalMin` harmful ones and at least `signalRatio` times as often,
 * per text, among the harmful as among the benign. The hard negatives ("bomb shelter") share
 * the harmful texts' words, so "bomb" is none while "gun" is. Being frequent in harmful text
 * is not enough to say a text is like them: the sets' hateful requests say "people" and their
 * self-harm ones "method" far more often than their benign prompts do, yet both are everyday
 * English ("people and cars", a README's "this method returns…"). So a stem opens the gate
 * alone only when it is also seldom in benign text (in at most `signalShare` of the benign
 * texts), and a commoner one (up to `pairedShare`) only beside a second one.
 */
export function gateOf(c: StemCounts, options: GateOptions, excluded: ReadonlySet<string> = NO_SIGNAL): Gate {
  const signals: string[] = [];
  const pairedSignals: string[] = [];
  for (const [stem, share] of signalShares(c, options, excluded)) {
    if (share <= options.signalShare) signals.push(stem);
    else if (share <= options.pairedShare) pairedSignals.push(stem);
  }
  const gate: Gate = { signals: signals.sort(), pairedSignals: pairedSignals.sort() };
  // Another language: only what harmful texts of other languages hold, and their benign ones seldom.
  // Its grams are thin (a few hundred texts per language), so a text with no such word is left to
  // the rules' reading rather than to grams that mostly say which language it is.
  if (options.foreignShare !== undefined) {
    gate.foreignSignals = [...signalShares(c.foreign, options, NO_FOREIGN_SIGNAL)]
      .filter(([, share]) => share <= options.foreignShare!)
      .map(([stem]) => stem)
      .sort();
  }
  return gate;
}

/** The stems found in `signalMin` harmful texts and `signalRatio` times as often per text as in benign ones, with their share of the benign texts. */
function signalShares(c: Counts, options: GateOptions, excluded: ReadonlySet<string>): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  const harmful = Math.max(1, c.harmful);
  const benign = Math.max(1, c.benign);
  // Half a benign text's worth added, so a stem never seen in benign text needs signalMin harmful ones, not one.
  for (const [stem, [h, b]] of c.counts) {
    if (excluded.has(stem) || h < options.signalMin || h / harmful < (options.signalRatio * (b + 0.5)) / benign) continue;
    out.push([stem, b / benign]);
  }
  return out;
}

/** The gate of `samples` under `options`. */
export function signalStems(samples: readonly Encoded[], options: GateOptions): Gate {
  return gateOf(stemCounts(samples), options);
}

/** A gate as the model carries it (`mayJudge` reads these). */
export function gateSets(gate: Gate): Pick<ClassifierModel, 'signals' | 'pairedSignals' | 'signalSet' | 'pairedSet' | 'foreignSignals' | 'foreignSet'> {
  const paired = gate.pairedSignals.length > 0;
  return {
    signals: gate.signals,
    signalSet: new Set(gate.signals),
    pairedSignals: paired ? gate.pairedSignals : undefined,
    pairedSet: paired ? new Set(gate.pairedSignals) : undefined,
    foreignSignals: gate.foreignSignals,
    foreignSet: gate.foreignSignals && new Set(gate.foreignSignals),
  };
}

/** The label of `sample` for output `o` (1, 0), or undefined when that output does not learn from it. */
function label(sample: Encoded, o: number): number | undefined {
  if (o === 0) return sample.harmful ? 1 : 0;
  // A category output learns only from harmful text: it names a category, it does not decide.
  return sample.harmful ? (sample.category === OUTPUTS[o] ? 1 : 0) : undefined;
}

/** Fits the weights (floats) and biases on `samples`. */
export function fit(samples: Encoded[], options: TrainingOptions): { weights: Float32Array; bias: Float64Array } {
  const k = OUTPUTS.length;
  const weights = new Float32Array((1 << options.bits) * k); // output-major, as the model file
  const squares = new Float32Array(weights.length).fill(1e-8);
  const bias = new Float64Array(k);
  const biasSquares = new Float64Array(k).fill(1e-8);
  const next = rng(options.seed); // seeded, so the shuffles and the weights repeat
  const order = samples.map((_, i) => i);
  for (let epoch = 0; epoch < options.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const index of order) {
      const s = samples[index]!;
      const { buckets, value } = s.features;
      const weight = s.harmful ? 1 : options.benignWeight;
      for (let o = 0; o < k; o++) {
        const y = label(s, o);
        if (y === undefined) continue;
        let z = bias[o]!;
        const base = o << options.bits;
        for (const b of buckets) z += weights[base + b]! * value;
        const g = weight * (1 / (1 + Math.exp(-z)) - y);
        biasSquares[o]! += g * g;
        bias[o]! -= (options.rate * g) / Math.sqrt(biasSquares[o]!);
        for (const b of buckets) {
          const at = base + b;
          const gw = g * value + options.l2 * weights[at]!;
          squares[at]! += gw * gw;
          weights[at]! -= (options.rate * gw) / Math.sqrt(squares[at]!);
        }
      }
    }
  }
  return { weights, bias };
}

/** The weights (output-major) as one signed byte each, scaled per output by its largest weight. */
export function quantise(weights: Float32Array, k: number): { bytes: Int8Array; scales: number[] } {
  const size = weights.length / k;
  const scales: number[] = [];
  const bytes = new Int8Array(weights.length);
  for (let o = 0; o < k; o++) {
    let largest = 0;
    for (let i = o * size; i < (o + 1) * size; i++) largest = Math.max(largest, Math.abs(weights[i]!));
    const scale = largest === 0 ? 1 : largest / 127;
    for (let i = o * size; i < (o + 1) * size; i++) bytes[i] = Math.round(weights[i]! / scale);
    scales.push(scale);
  }
  return { bytes, scales };
}

/** Trains on `samples` and returns the quantised model (its threshold and checksum left for the caller). */
export function train(samples: Encoded[], options: TrainingOptions): ClassifierModel {
  const { weights, bias } = fit(samples, options);
  const { bytes, scales } = quantise(weights, OUTPUTS.length);
  return {
    ...gateSets(signalStems(samples, options)),
    bits: options.bits,
    outputs: OUTPUTS,
    bias: [...bias],
    scales,
    threshold: 0.5,
    overrule: 0,
    trainingChecksum: '',
    training: { ...options },
    weights: bytes,
  };
}
