/**
 * npm run train:moderation [-- --check] [-- --dry-run [--ungated] [--signal-ratio R] [--signal-min N] [--signal-share S] [--paired-share P] [--without SET]]
 *   [-- --gates] [-- --threshold T [--overrule O] [--frame-bound B]] [-- --repository-text] [-- --floor F] [-- --sweep]
 *   [-- --misses] [-- --dump FILE]
 *
 * Trains the embedded policy's classifier (server/providers/moderation/classifier.ts)
 * on every labelled set under test/fixtures/moderation/ and writes
 * classifier-model.json and classifier-model.bin beside it. Deterministic: the
 * same sets and options give the same files.
 *
 * First, leave-one-set-out validation: for each set file, a model trained on all
 * the others judges it. That is the honest in-repo estimate of text the model
 * has not seen. It picks the threshold (the harmful probability from which the
 * classifier refuses) and the overrule bound (under which it overrules a rule's
 * refusal, and only a bound under which no harmful text the rules refuse would
 * pass): the pair with the most pooled recall whose pooled false positives
 * stay within MAX_FALSE_POSITIVES; and it prints, per file, recall, false
 * positives and hard-negative false positives for the rules alone, the
 * classifier alone and the two together.
 * Then the model is trained on every set and written with that threshold.
 *
 * The frame judge (server/providers/moderation/frame.ts), which reviews every refusal, is
 * validated the same way: a judge trained without each file reviews that file's refusals, and its
 * bound is chosen with the threshold (the most pooled recall whose pooled false positives stay
 * within MAX_FALSE_POSITIVES, and within MAX_UNTUNED_FALSE_POSITIVES on the files the rules were
 * never tuned on, letting no sexual content with minors through); it is then trained on every set
 * and written beside the classifier (frame-model.json, frame-model.bin).
 *
 * The classifier judges only texts its gate opens for (classifier.ts, `mayJudge`): each
 * left-out file is gated by the signal stems of the model that judges it, so the figures
 * count what the gate costs in recall. Last, the final model's refusals on the
 * out-of-distribution corpus (scripts/moderation/ood.ts) are printed: measured, never trained
 * or chosen on.
 *
 * With --check nothing is written: exits 1 when a shipped model's checksum (the classifier's
 * or the frame judge's) is not that of the sets and options (what test/unit/moderation-classifier.test.ts holds).
 * With --dry-run nothing is written either: the validation and the out-of-distribution
 * figures for other options (--ungated: no gate; --signal-ratio, --signal-min, --signal-share,
 * --paired-share: the gate's stems, train.ts `gateOf`; --without SET, a set file left out of
 * training, e.g. train/repository). With --gates nothing is written: gates of several signal and
 * paired shares side by side (validation, the threshold each would choose, and the final
 * model's out-of-distribution refusals behind each), from one training.
 * With --threshold (and --overrule) the validation is skipped and the final model is written with
 * the threshold and bound a full run (or --gates, for the gate the options give) printed for
 * these sets and options: training is deterministic, so the files are those the full run writes.
 * With --floor F (nothing written) the threshold may fall to F; with --sweep (nothing written) the
 * validation figures of every threshold from 0.75 down to 0.3 with every frame bound are printed
 * too (docs/policies.md, "A lower threshold behind the judge").
 * With --misses (nothing written) the harmful texts of the files the rules were never tuned on that
 * the chosen point lets through are listed with why (gate closed, under the threshold, overruled by
 * the judge, too few words); with --dump FILE (nothing written) every sample's leave-one-set-out
 * readings (rules, classifier, judge, stems) are written to FILE as JSON, for analysis without retraining.
 * With --repository-text, test/fixtures/moderation/train/repository.yaml (benign prose of the
 * repository's own, scripts/moderation/repository-text.ts) is written again first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { embeddedModeration, holdsTerm } from '../server/providers/moderation/local.ts';
import { secondReading } from '../server/providers/moderation/confusables.ts';
import { gloss } from '../server/providers/moderation/gloss.ts';
import { stopWordDetector } from '../server/providers/moderation/language.ts';
import { inDictionary, tokenize } from '../server/providers/moderation/normalize.ts';
import {
  likeliestCategory,
  logit,
  mayJudge,
  MODEL_DIR,
  MODEL_HEADER,
  MODEL_WEIGHTS,
  readModel,
  sigmoid,
  type ClassifierModel,
  type ModelHeader,
} from '../server/providers/moderation/classifier.ts';
import { MIN_JUDGED_WORDS } from '../server/providers/moderation/features.ts';
import {
  CATEGORIES,
  DEFAULT_OPTIONS,
  encode,
  GROUP_CATEGORY,
  gateOf,
  gateSets,
  readTrainingSets,
  stemCounts,
  train,
  trainingChecksum,
  withoutCounts,
  type Encoded,
  type GateOptions,
  type TrainingOptions,
} from './moderation/train.ts';
import { OOD_FILES, oodRefusals, readOod } from './moderation/ood.ts';
import { encodeFrame, FRAME_OPTIONS, frameChecksum, trainFrame } from './moderation/frame-train.ts';
import {
  FRAME_HEADER,
  FRAME_WEIGHTS,
  frameHarm,
  NEVER_OVERRULED,
  readFrameModel,
  type FrameHeader,
  type FrameModel,
} from '../server/providers/moderation/frame.ts';
import { writeRepositorySet } from './moderation/repository-text.ts';
import type { LabelledSet } from './moderation/eval-set.ts';

const { values } = parseArgs({
  options: {
    check: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
    ungated: { type: 'boolean', default: false },
    'signal-ratio': { type: 'string' },
    'signal-min': { type: 'string' },
    'signal-share': { type: 'string' },
    'paired-share': { type: 'string' },
    'foreign-share': { type: 'string' },
    gates: { type: 'boolean', default: false },
    'foreign-gates': { type: 'boolean', default: false },
    threshold: { type: 'string' },
    overrule: { type: 'string' },
    'frame-bound': { type: 'string' },
    'repository-text': { type: 'boolean', default: false },
    floor: { type: 'string' },
    sweep: { type: 'boolean', default: false },
    without: { type: 'string', multiple: true },
    misses: { type: 'boolean', default: false },
    dump: { type: 'string' },
  },
});
const GATE_FLAGS = ['signal-ratio', 'signal-min', 'signal-share', 'paired-share', 'foreign-share'] as const;
const dryRun =
  values['dry-run'] ||
  values.ungated ||
  values.gates ||
  values['foreign-gates'] ||
  values.sweep ||
  values.misses ||
  values.dump !== undefined ||
  values.floor !== undefined ||
  GATE_FLAGS.some((f) => values[f] !== undefined) ||
  values.without !== undefined;

/** The leave-one-set-out false-positive rate the operating point must keep (a margin under the 2 % target on unseen sets). */
const MAX_FALSE_POSITIVES = 0.012;
/**
 * The same bound over the files the rules were never tuned on (`RULES_UNTUNED`): the rules' false
 * positives on the other files were tuned away in-sample, so the pooled figure flatters them, and
 * on unseen sets the rules alone refused 2.6–4.4 % of benign text.
 */
const MAX_UNTUNED_FALSE_POSITIVES = 0.008;
/**
 * The lowest threshold the classifier may be given. Out of distribution, lower ones refused the
 * repository's own prompts ("You are terse." at 0.62, a media test's sentence at 0.70) and more
 * than 1 % of the README sentences (0.56); validation alone, which never sees such text, would
 * choose 0.3 with the frame judge behind it (7 test strings and 1.1 % of README sentences refused).
 * The judge does not take those away: every threshold under 0.747 still refuses a test string the
 * shipped one passes, since its agreement carries the classifier's own probability and it reads
 * such text as no less harmful (docs/policies.md). --floor: a dry run under another floor.
 */
const THRESHOLD_FLOOR = values.floor === undefined ? 0.75 : Number(values.floor);
/**
 * The files no rule was written or tuned for: the training sets, blind-7 (no rule changed after its
 * first measurement), and blind-8 to blind-10 should they join the training (no rule was tuned on them).
 */
const RULES_UNTUNED = /^(train\/train-|blind-(7|8|9|10)\/)/;
/** The bounds tried for the frame judge (frame.ts: the geometric mean of its and the classifier's harmful probability; 0: it never overrules). */
const FRAME_BOUNDS = [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3];
/** The harmful probabilities tried as "confidently benign" (0: the classifier never overrules a rule). */
const OVERRULE_BOUNDS = [0, 0.005, 0.01, 0.02, 0.05];

const options: TrainingOptions = {
  ...DEFAULT_OPTIONS,
  ...(values['signal-ratio'] === undefined ? {} : { signalRatio: Number(values['signal-ratio']) }),
  ...(values['signal-min'] === undefined ? {} : { signalMin: Number(values['signal-min']) }),
  ...(values['signal-share'] === undefined ? {} : { signalShare: Number(values['signal-share']) }),
  ...(values['paired-share'] === undefined ? {} : { pairedShare: Number(values['paired-share']) }),
  // `--foreign-share none`: every text in another language opens the gate (the model before).
  ...(values['foreign-share'] === undefined ? {} : { foreignShare: values['foreign-share'] === 'none' ? undefined : Number(values['foreign-share']) }),
};
if (values['repository-text']) writeRepositorySet();
const checksum = trainingChecksum(options);
const frameSum = frameChecksum(FRAME_OPTIONS);
if (values.check) {
  const shipped = readModel().trainingChecksum;
  const frame = readFrameModel().trainingChecksum;
  const fresh = shipped === checksum && frame === frameSum;
  console.log(
    fresh
      ? 'the shipped models are trained on these sets'
      : `the shipped models (${shipped}, frame ${frame}) are not trained on these sets (${checksum}, frame ${frameSum}): run npm run train:moderation`,
  );
  process.exit(fresh ? 0 : 1);
}

const policy = loadModerationPolicy(loadConfig(process.env).moderationPolicyPath);
const sets = readTrainingSets().filter((s) => !values.without?.includes(s.name));
const encoded = sets.map((s) => encode(s, policy.vocabulary, options.bits));
const framed = sets.map((s) => encodeFrame(s, policy, FRAME_OPTIONS.bits));

/** The categories the rules alone refuse each sample of each set for (none: passed), and whether a term or pattern refuses it (no frame judge overrules those). */
async function rulesVerdicts(): Promise<{ categories: string[][][]; terms: boolean[][] }> {
  const rules = embeddedModeration(policy, undefined, { classifier: false });
  const languages = stopWordDetector(inDictionary);
  const categories: string[][][] = [];
  const terms: boolean[][] = [];
  for (const set of sets) {
    const verdicts: string[][] = [];
    const held: boolean[] = [];
    for (const s of set.samples) {
      const found = (await rules.moderate({ texts: [{ field: 'prompt', text: s.text }], preference: 'standard' })).flagged?.categories ?? [];
      verdicts.push(found);
      // As the server reads a refusal: its own words, its look-alikes' second reading, its gloss.
      const readings = [s.text, secondReading(s.text), gloss(s.text, languages.detect(s.text), (w) => policy.vocabulary.isWord(w))];
      held.push(found.length > 0 && readings.some((r) => r !== undefined && holdsTerm(policy, tokenize(r, policy.vocabulary))));
    }
    categories.push(verdicts);
    terms.push(held);
  }
  return { categories, terms };
}

/** Per sample, its distinct stems as tokens (what `mayJudge` reads). */
const stemTokens = encoded.map((e) => e.map((x) => x.stems.map((stem) => ({ stem }))));
/** Whether `gate` opens for sample i of set f (as `mayJudge` reads it); --ungated: always. */
const opens = (gate: Pick<ClassifierModel, 'signalSet' | 'pairedSet'>, f: number, i: number) =>
  values.ungated || mayJudge(gate, stemTokens[f]![i]!, encoded[f]![i]!.foreign);

/** Each sample's harmful probability from a model trained without its set, and the category it would be refused for. */
function leftOutScores(): { scores: number[][]; categories: string[][] } {
  const categories: string[][] = [];
  const scores = encoded.map((_, left) => {
    const model = train(
      encoded.flatMap((e, i) => (i === left ? [] : e)),
      options,
    );
    categories.push(encoded[left]!.map((e: Encoded) => likeliestCategory(model, e.features)));
    return encoded[left]!.map((e: Encoded) => sigmoid(logit(model, e.features, 0)));
  });
  return { scores, categories };
}

/** Each sample's harmful probability by the frame judge trained without its set. */
function leftOutFrame(): number[][] {
  return framed.map((_, left) => {
    const model = trainFrame(
      framed.flatMap((e, i) => (i === left ? [] : e)),
      FRAME_OPTIONS,
    );
    return framed[left]!.map((e) => frameHarm(model, e.features));
  });
}

interface Tally {
  harmful: number;
  caught: number;
  benign: number;
  refused: number;
  hard: number;
  hardRefused: number;
}

function tally(set: LabelledSet, refused: (i: number) => boolean): Tally {
  const t: Tally = { harmful: 0, caught: 0, benign: 0, refused: 0, hard: 0, hardRefused: 0 };
  set.samples.forEach((s, i) => {
    const r = refused(i);
    if (s.harmful) {
      t.harmful++;
      if (r) t.caught++;
    } else {
      t.benign++;
      if (r) t.refused++;
      if (s.group === 'hard-negative') {
        t.hard++;
        if (r) t.hardRefused++;
      }
    }
  });
  return t;
}

const add = (a: Tally, b: Tally): Tally => ({
  harmful: a.harmful + b.harmful,
  caught: a.caught + b.caught,
  benign: a.benign + b.benign,
  refused: a.refused + b.refused,
  hard: a.hard + b.hard,
  hardRefused: a.hardRefused + b.hardRefused,
});
const pct = (n: number, d: number) => (d === 0 ? '–' : `${((100 * n) / d).toFixed(1)} %`);
const cells = (t: Tally) => `${pct(t.caught, t.harmful)} | ${pct(t.refused, t.benign)} | ${pct(t.hardRefused, t.hard)}`;

if (values.threshold !== undefined) {
  // The threshold and bounds a validation run already chose for these sets and options
  // (training is deterministic, so the same run would choose them again): the final models alone.
  const model = train(encoded.flat(), options);
  const chosen = { ...model, threshold: Number(values.threshold), overrule: Number(values.overrule ?? 0) };
  writeModel(chosen);
  writeFrame(Number(values['frame-bound'] ?? 0));
  process.exit(0);
}

const { categories: ruleCategories, terms: ruleTerms } = await rulesVerdicts();
const rules = ruleCategories.map((set) => set.map((c) => c.length > 0));
const { scores, categories: learnedCategory } = leftOutScores();
const frameScores = leftOutFrame();
// --dump FILE: every sample's leave-one-set-out readings, for analysis without retraining.
if (values.dump !== undefined)
  fs.writeFileSync(
    values.dump,
    JSON.stringify(
      sets.map((set, f) => ({
        name: set.name,
        samples: set.samples.map((s, i) => ({
          text: s.text,
          group: s.group,
          harmful: s.harmful,
          rules: ruleCategories[f]![i]!,
          term: ruleTerms[f]![i]!,
          score: scores[f]![i]!,
          category: learnedCategory[f]![i]!,
          frame: frameScores[f]![i]!,
          words: encoded[f]![i]!.features.words,
          foreign: encoded[f]![i]!.foreign,
          stems: encoded[f]![i]!.stems,
        })),
      })),
    ),
  );
const setCounts = encoded.map(stemCounts);
const allCounts = stemCounts(encoded.flat());
const pooled = (ts: Tally[]) => ts.reduce(add);
/**
 * The files the threshold is chosen on: those with harmful text, the prompts of the sets' kinds.
 * A file of benign prose alone (train/repository: documentation and comments) is another kind
 * of text, thousands of items that would outweigh the prompts' false positives; it is reported
 * beside them, and text of its kind is bounded by the out-of-distribution gate instead.
 */
const prompts = sets.map((set) => set.samples.some((s) => s.harmful));
const pooledPrompts = (ts: Tally[]) => pooled(ts.filter((_, f) => prompts[f]));

/** Harmful texts the rules refuse that the classifier would overrule under `bound`. */
const overruledHarm = (bound: number) =>
  sets.reduce((n, set, f) => n + set.samples.filter((s, i) => s.harmful && rules[f]![i]! && scores[f]![i]! < bound).length, 0);

/** Per set, the indices of its samples read as another language. */
const foreignIndex = encoded.map((e) => e.flatMap((x, i) => (x.foreign ? [i] : [])));

/** Leave-one-set-out validation under one gate: each left-out file gated by the gate of the model that judges it. */
function validate(gateOptions: GateOptions) {
  const gates = sets.map((_, f) => {
    const gate = gateSets(gateOf(withoutCounts(allCounts, setCounts[f]!), gateOptions));
    return sets[f]!.samples.map((_, i) => opens(gate, f, i));
  });
  /** Whether the classifier refuses sample i of set f at `threshold` (it judges only texts of MIN_JUDGED_WORDS or more its gate opens for). */
  const learned = (f: number, i: number, threshold: number) =>
    gates[f]![i]! && scores[f]![i]! >= threshold && encoded[f]![i]!.features.words >= MIN_JUDGED_WORDS;
  /** Refused before the frame judge: a rule that the classifier does not overrule, or the classifier. */
  const refusedBefore = (f: number, i: number, threshold: number, overrule: number) =>
    (rules[f]![i]! && scores[f]![i]! >= overrule) || learned(f, i, threshold);
  /** The frame judge overrules sample i of set f under `bound` (never a refusal for a category it may not overrule). */
  const frameOverrules = (f: number, i: number, bound: number) => {
    if (rules[f]![i]! && ruleTerms[f]![i]!) return false;
    const categories = rules[f]![i]! ? ruleCategories[f]![i]! : [learnedCategory[f]![i]!];
    return Math.sqrt(frameScores[f]![i]! * scores[f]![i]!) < bound && !categories.some((c) => NEVER_OVERRULED.has(c));
  };
  /** Refused by the rules and the classifier, then reviewed by the frame judge. */
  const refusedBy = (threshold: number, overrule: number, bound: number) => (f: number, i: number) =>
    refusedBefore(f, i, threshold, overrule) && !frameOverrules(f, i, bound);
  const combined = (threshold: number, overrule: number, bound = 0) => sets.map((s, f) => tally(s, (i) => refusedBy(threshold, overrule, bound)(f, i)));
  /** Harmful texts of sexual content with minors, refused before the frame judge, that it would let through: any rules a bound out. */
  const minorsLetThrough = (threshold: number, overrule: number, bound: number) =>
    sets.reduce(
      (n, set, f) =>
        n +
        set.samples.filter(
          (s, i) => s.harmful && GROUP_CATEGORY.get(s.group) === 'sexual-minors' && refusedBefore(f, i, threshold, overrule) && frameOverrules(f, i, bound),
        ).length,
      0,
    );
  const untuned = (ts: Tally[]) =>
    pooledPrompts(ts.map((t, f) => (RULES_UNTUNED.test(sets[f]!.name) ? t : { harmful: 0, caught: 0, benign: 0, refused: 0, hard: 0, hardRefused: 0 })));
  // For each bound of "confidently benign" that overrules no harmful text the rules refuse (an
  // overrule may only take false positives away) and each bound of the frame judge that lets no
  // sexual content with minors through, the threshold with the most pooled recall whose pooled
  // false positives stay within the margin, and within a tighter one on the files the rules were
  // never tuned on; then the triple with the most recall. (Where the first measurements of unseen sets
  // were read beside these figures, their false positives were about twice those of the files the
  // rules were never tuned on: hence 0.8 % there, for under 2 % on new text.)
  let chosen = { threshold: 0.99, overrule: 0, bound: 0, recall: 0 };
  for (const overrule of OVERRULE_BOUNDS) {
    if (overruledHarm(overrule) > 0) continue;
    for (const bound of FRAME_BOUNDS)
      for (let t = 0.99; t >= THRESHOLD_FLOOR; t = Math.round((t - 0.01) * 100) / 100) {
        const tallies = combined(t, overrule, bound);
        const p = pooledPrompts(tallies);
        const u = untuned(tallies);
        if (p.refused / p.benign > MAX_FALSE_POSITIVES || u.refused / u.benign > MAX_UNTUNED_FALSE_POSITIVES) continue;
        if (p.caught / p.harmful <= chosen.recall || minorsLetThrough(t, overrule, bound) > 0) continue;
        chosen = { threshold: t, overrule, bound, recall: p.caught / p.harmful };
      }
  }
  const { threshold, overrule, bound } = chosen;
  const both = combined(threshold, overrule, bound);
  const rows = sets.map((s, f) => ({
    name: s.name,
    rules: tally(s, (i) => rules[f]![i]!),
    classifier: tally(s, (i) => learned(f, i, threshold)),
    both: both[f]!,
  }));
  const gated = pooled(sets.map((s, f) => tally(s, (i) => gates[f]![i]!)));
  // The texts read as another language alone, pooled over the prompt sets: what the foreign gate costs and saves.
  const foreignOnly = (refused: (f: number, i: number) => boolean) =>
    pooledPrompts(sets.map((s, f) => tally({ ...s, samples: s.samples.filter((_, i) => encoded[f]![i]!.foreign) }, (i) => refused(f, foreignIndex[f]![i]!))));
  const foreign = {
    rules: foreignOnly((f, i) => rules[f]![i]!),
    classifier: foreignOnly((f, i) => learned(f, i, threshold)),
    both: foreignOnly(refusedBy(threshold, overrule, bound)),
    gated: foreignOnly((f, i) => gates[f]![i]!),
  };
  // The operating point without the frame judge, as it was chosen before it (false positives within 1.5 %), for comparison.
  let before = { threshold: 0.99, recall: 0 };
  for (let t = 0.99; t >= 0.2; t = Math.round((t - 0.01) * 100) / 100) {
    const p = pooledPrompts(combined(t, 0));
    if (p.refused / p.benign > 0.015) break;
    if (p.caught / p.harmful > before.recall) before = { threshold: t, recall: p.caught / p.harmful };
  }
  const withoutFrame = combined(before.threshold, 0);
  const summary = {
    before: { threshold: before.threshold, all: pooledPrompts(withoutFrame), untuned: untuned(withoutFrame) },
    after: { all: pooledPrompts(both), untuned: untuned(both) },
    bounds: FRAME_BOUNDS.map((b) => {
      const ts = combined(threshold, overrule, b);
      return { bound: b, all: pooledPrompts(ts), untuned: untuned(ts), minors: minorsLetThrough(threshold, overrule, b) };
    }),
  };
  /** --sweep: every threshold from 0.3 with every frame bound, at the chosen overrule (pooled and untuned prompt sets, minors let through). */
  const sweep: Array<{ threshold: number; bound: number; all: Tally; untuned: Tally; minors: number }> = [];
  if (values.sweep)
    for (let t = 0.75; t >= 0.3; t = Math.round((t - 0.05) * 100) / 100)
      for (const b of FRAME_BOUNDS) {
        const ts = combined(t, overrule, b);
        sweep.push({ threshold: t, bound: b, all: pooledPrompts(ts), untuned: untuned(ts), minors: minorsLetThrough(t, overrule, b) });
      }
  /**
   * --misses: the harmful texts of the files the rules were never tuned on that the chosen point
   * lets through, and why: the gate closed (the model never read it), too few words, under the
   * threshold (with its probability), or refused and then overruled by the frame judge.
   */
  const misses: string[] = [];
  sets.forEach((set, f) => {
    if (!RULES_UNTUNED.test(set.name)) return;
    set.samples.forEach((s, i) => {
      if (!s.harmful || refusedBy(threshold, overrule, bound)(f, i)) return;
      const why = refusedBefore(f, i, threshold, overrule)
        ? `judge overruled (frame ${frameScores[f]![i]!.toFixed(2)}, classifier ${scores[f]![i]!.toFixed(2)})`
        : !gates[f]![i]!
          ? `gate closed (classifier ${scores[f]![i]!.toFixed(2)})`
          : encoded[f]![i]!.features.words < MIN_JUDGED_WORDS
            ? 'too few words'
            : `under the threshold (${scores[f]![i]!.toFixed(2)})`;
      misses.push(`${set.name}\t${s.group}\t${why}\t${JSON.stringify(s.text.slice(0, 200))}`);
    });
  });
  return { threshold, overrule, bound, rows, gated, foreign, summary, sweep, misses };
}
for (const overrule of OVERRULE_BOUNDS) console.log(`overrule under ${overrule}: ${overruledHarm(overrule)} harmful texts the rules refuse would pass`);
const model = train(encoded.flat(), options);
if (values.ungated) {
  delete model.signalSet;
  delete model.pairedSet;
}

/** The out-of-distribution refusals of `classifier` (measured, never trained or chosen on). */
async function outOfDistribution(
  classifier: ClassifierModel,
  print: boolean,
  frame: FrameModel | false = false,
): Promise<Array<Array<{ text: string; categories: string[] }>>> {
  const all: Array<Array<{ text: string; categories: string[] }>> = [];
  for (const name of Object.values(OOD_FILES)) {
    const texts = readOod(name);
    const refused = await oodRefusals(embeddedModeration(policy, undefined, { classifier, frame }), texts);
    all.push(refused);
    if (!print) continue;
    const rules = await oodRefusals(embeddedModeration(policy, undefined, { classifier: false }), texts);
    console.log(`out of distribution, ${name}: ${refused.length}/${texts.length} refused (${pct(refused.length, texts.length)}; rules alone ${rules.length})`);
    for (const r of refused) console.log(`    ${JSON.stringify(r.text.slice(0, 160))} → ${r.categories.join(', ')}`);
  }
  return all;
}

if (values.gates) {
  // Gates side by side: the weights do not depend on the gate, so one training serves them all.
  console.log(
    '\n| signal ratio | signal share | paired share | stems alone / paired | threshold | overrule | both: recall | FP | hard-neg FP | classifier: recall | FP | gate opens: harmful | benign | OOD test strings | OOD READMEs |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  const refusals: string[] = [];
  const variants: GateOptions[] = [
    ...[6, 10].map((signalRatio) => ({ ...options, signalRatio, signalShare: 1, pairedShare: 0 })),
    ...[1, 0.002, 0.001, 0.0005, 0.00025].flatMap((signalShare) =>
      [0, 0.002, 0.005, 0.01].filter((p) => p === 0 || p > signalShare).map((pairedShare) => ({ ...options, signalShare, pairedShare })),
    ),
  ];
  for (const gateOptions of variants) {
    const { signalRatio, signalShare, pairedShare } = gateOptions;
    const v = validate(gateOptions);
    const gate = gateOf(allCounts, gateOptions);
    const ood = await outOfDistribution({ ...model, ...gateSets(gate), threshold: v.threshold, overrule: v.overrule }, false);
    const b = pooledPrompts(v.rows.map((r) => r.both));
    const c = pooledPrompts(v.rows.map((r) => r.classifier));
    console.log(
      `| ${signalRatio} | ${signalShare} | ${pairedShare} | ${gate.signals.length} / ${gate.pairedSignals.length} | ${v.threshold} | ${v.overrule} | ${cells(b)} | ${pct(c.caught, c.harmful)} | ${pct(c.refused, c.benign)} | ${pct(v.gated.caught, v.gated.harmful)} | ${pct(v.gated.refused, v.gated.benign)} | ${ood.map((r) => r.length).join(' | ')} |`,
    );
    refusals.push(
      `signal ratio ${signalRatio}, signal share ${signalShare}, paired share ${pairedShare}:`,
      ...ood.flat().map((r) => `    ${JSON.stringify(r.text.slice(0, 100))} → ${r.categories.join(', ')}`),
    );
  }
  console.log(`\nout of distribution, refused behind each gate:\n${refusals.join('\n')}`);
  process.exit(0);
}

if (values['foreign-gates']) {
  // The foreign gate's shares side by side (the weights do not depend on it): pooled prompt sets, and their texts in other languages.
  console.log(
    '\n| foreign share | foreign signals | threshold | overrule | both: recall | FP | hard-neg FP | other languages, both: recall | FP | rules: recall | FP | gate opens: harmful | benign |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const foreignShare of [undefined, 0.002, 0.005, 0.01, 0.02, 0.05]) {
    const gateOptions = { ...options, foreignShare };
    const v = validate(gateOptions);
    const gate = gateOf(allCounts, gateOptions);
    const b = pooledPrompts(v.rows.map((r) => r.both));
    console.log(
      `| ${foreignShare ?? 'none (every text)'} | ${gate.foreignSignals?.length ?? '–'} | ${v.threshold} | ${v.overrule} | ${cells(b)} | ${pct(v.foreign.both.caught, v.foreign.both.harmful)} | ${pct(v.foreign.both.refused, v.foreign.both.benign)} | ${pct(v.foreign.rules.caught, v.foreign.rules.harmful)} | ${pct(v.foreign.rules.refused, v.foreign.rules.benign)} | ${pct(v.foreign.gated.caught, v.foreign.gated.harmful)} | ${pct(v.foreign.gated.refused, v.foreign.gated.benign)} |`,
    );
  }
  process.exit(0);
}

const { threshold, overrule, bound, rows, gated, foreign, summary, sweep, misses } = validate(options);
if (values.misses) console.log(`\nharmful texts missed in the files the rules were never tuned on (${misses.length}):\n${misses.join('\n')}`);
if (values.sweep) {
  console.log('| threshold | frame bound | all: recall | FP | untuned: recall | FP | minors let through |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of sweep)
    console.log(
      `| ${r.threshold} | ${r.bound} | ${pct(r.all.caught, r.all.harmful)} | ${pct(r.all.refused, r.all.benign)} | ${pct(r.untuned.caught, r.untuned.harmful)} | ${pct(r.untuned.refused, r.untuned.benign)} | ${r.minors} |`,
    );
}
console.log(
  `\nleave-one-set-out validation (threshold ${threshold}, overrule under ${overrule}, frame judge under ${bound}: the most recall whose pooled false positives stay ≤ ${100 * MAX_FALSE_POSITIVES} %, ≤ ${100 * MAX_UNTUNED_FALSE_POSITIVES} % on the files the rules were never tuned on)\n`,
);
const sum = (t: Tally) => `recall ${pct(t.caught, t.harmful)}, false positives ${pct(t.refused, t.benign)} (hard negatives ${pct(t.hardRefused, t.hard)})`;
console.log(
  `without the frame judge (threshold ${summary.before.threshold}): all prompt sets ${sum(summary.before.all)}; rules never tuned on ${sum(summary.before.untuned)}`,
);
console.log(`with it: all prompt sets ${sum(summary.after.all)}; rules never tuned on ${sum(summary.after.untuned)}`);
console.log(`at threshold ${threshold}, per frame bound:`);
for (const b of summary.bounds) console.log(`  ${b.bound}: all ${sum(b.all)}; untuned ${sum(b.untuned)}; sexual content with minors let through: ${b.minors}`);
console.log('| set | rules: recall | FP | hard-neg FP | classifier: recall | FP | hard-neg FP | both: recall | FP | hard-neg FP |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.name} | ${cells(r.rules)} | ${cells(r.classifier)} | ${cells(r.both)} |`);
console.log(
  `| **all prompt sets** | ${cells(pooledPrompts(rows.map((r) => r.rules)))} | ${cells(pooledPrompts(rows.map((r) => r.classifier)))} | ${cells(pooledPrompts(rows.map((r) => r.both)))} |`,
);
console.log(`| *texts in other languages* | ${cells(foreign.rules)} | ${cells(foreign.classifier)} | ${cells(foreign.both)} |`);
console.log(
  `\nthe gate opened for ${pct(gated.caught, gated.harmful)} of harmful texts, ${pct(gated.refused, gated.benign)} of benign ones, ${pct(gated.hardRefused, gated.hard)} of hard negatives`,
);

console.log(
  `the gate opened for ${pct(foreign.gated.caught, foreign.gated.harmful)} of harmful texts in other languages, ${pct(foreign.gated.refused, foreign.gated.benign)} of benign ones`,
);
console.log(
  `${model.signals!.length} signal stems, ${model.pairedSignals?.length ?? 0} paired, ${model.foreignSignals?.length ?? 'no'} foreign${values.ungated ? ' (not used: --ungated)' : ''}`,
);
const final = { ...model, threshold, overrule };
const finalFrame = frameModel(bound);
await outOfDistribution(final, true, finalFrame);
if (dryRun) process.exit(0);
writeModel(final);
writeFrame(bound);

/** The frame judge trained on every set, with `bound`. */
function frameModel(b: number): FrameModel {
  const trained = trainFrame(framed.flat(), FRAME_OPTIONS);
  return {
    ...trained,
    bound: b,
    categories: CATEGORIES,
    categorySet: new Set(CATEGORIES.filter((c) => !NEVER_OVERRULED.has(c))),
    trainingChecksum: frameSum,
    training: { ...FRAME_OPTIONS, sets: sets.map((s) => s.name), samples: framed.flat().length },
  };
}

/** Writes the frame judge's two files. */
function writeFrame(b: number): void {
  const m = frameModel(b);
  const header: FrameHeader = {
    bits: m.bits,
    bias: m.bias,
    scale: m.scale,
    bound: m.bound,
    categories: m.categories,
    trainingChecksum: m.trainingChecksum,
    training: m.training,
  };
  fs.writeFileSync(path.join(MODEL_DIR, FRAME_HEADER), `${JSON.stringify(header, null, 2)}\n`);
  fs.writeFileSync(path.join(MODEL_DIR, FRAME_WEIGHTS), m.weights);
  console.log(`wrote ${FRAME_HEADER} and ${FRAME_WEIGHTS} (${m.weights.length} bytes)`);
}

/** Writes the model's two files. */
function writeModel(m: ClassifierModel): void {
  const header: ModelHeader = {
    bits: m.bits,
    outputs: m.outputs,
    bias: m.bias,
    scales: m.scales,
    threshold: m.threshold,
    overrule: m.overrule,
    trainingChecksum: checksum,
    training: { ...options, sets: sets.map((s) => s.name), samples: encoded.flat().length },
    signals: m.signals,
    ...(m.pairedSignals === undefined ? {} : { pairedSignals: m.pairedSignals }),
    ...(m.foreignSignals === undefined ? {} : { foreignSignals: m.foreignSignals }),
  };
  fs.writeFileSync(path.join(MODEL_DIR, MODEL_HEADER), `${JSON.stringify(header, null, 2)}\n`);
  fs.writeFileSync(path.join(MODEL_DIR, MODEL_WEIGHTS), m.weights);
  console.log(`\nwrote ${MODEL_HEADER} and ${MODEL_WEIGHTS} (${m.weights.length} bytes) in ${path.relative(process.cwd(), MODEL_DIR)}`);
}
