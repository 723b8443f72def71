/**
 * npm run train:moderation [-- --check] [-- --dry-run [--ungated] [--signal-ratio R] [--signal-min N] [--without SET]] [-- --repository-text]
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
 * The classifier judges only texts its gate opens for (classifier.ts, `mayJudge`): each
 * left-out file is gated by the signal stems of the model that judges it, so the figures
 * count what the gate costs in recall. Last, the final model's refusals on the
 * out-of-distribution corpus (scripts/moderation/ood.ts) are printed: measured, never trained
 * or chosen on.
 *
 * With --check nothing is written: exits 1 when the shipped model's checksum is
 * not that of the sets and options (what test/unit/moderation-classifier.test.ts holds).
 * With --dry-run nothing is written either: the validation and the out-of-distribution
 * figures for other options (--ungated: no gate; --signal-ratio, --signal-min; --without SET,
 * a set file left out of training, e.g. train/repository).
 * With --repository-text, test/fixtures/moderation/train/repository.yaml (benign prose of the
 * repository's own, scripts/moderation/repository-text.ts) is written again first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { embeddedModeration } from '../server/providers/moderation/local.ts';
import {
  logit,
  MODEL_DIR,
  MODEL_HEADER,
  MODEL_WEIGHTS,
  readModel,
  sigmoid,
  type ClassifierModel,
  type ModelHeader,
} from '../server/providers/moderation/classifier.ts';
import { MIN_JUDGED_WORDS } from '../server/providers/moderation/features.ts';
import { DEFAULT_OPTIONS, encode, readTrainingSets, train, trainingChecksum, type Encoded, type TrainingOptions } from './moderation/train.ts';
import { OOD_FILES, oodRefusals, readOod } from './moderation/ood.ts';
import { writeRepositorySet } from './moderation/repository-text.ts';
import type { LabelledSet } from './moderation/eval-set.ts';

const { values } = parseArgs({
  options: {
    check: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
    ungated: { type: 'boolean', default: false },
    'signal-ratio': { type: 'string' },
    'signal-min': { type: 'string' },
    'repository-text': { type: 'boolean', default: false },
    without: { type: 'string', multiple: true },
  },
});
const dryRun =
  values['dry-run'] || values.ungated || values['signal-ratio'] !== undefined || values['signal-min'] !== undefined || values.without !== undefined;

/** The leave-one-set-out false-positive rate the threshold must keep (a margin under the 2 % target on unseen sets). */
const MAX_FALSE_POSITIVES = 0.015;
/** The harmful probabilities tried as "confidently benign" (0: the classifier never overrules a rule). */
const OVERRULE_BOUNDS = [0, 0.005, 0.01, 0.02, 0.05];

const options: TrainingOptions = {
  ...DEFAULT_OPTIONS,
  ...(values['signal-ratio'] === undefined ? {} : { signalRatio: Number(values['signal-ratio']) }),
  ...(values['signal-min'] === undefined ? {} : { signalMin: Number(values['signal-min']) }),
};
if (values['repository-text']) writeRepositorySet();
const checksum = trainingChecksum(options);
if (values.check) {
  const shipped = readModel().trainingChecksum;
  console.log(
    shipped === checksum
      ? 'the shipped model is trained on these sets'
      : `the shipped model (${shipped}) is not trained on these sets (${checksum}): run npm run train:moderation`,
  );
  process.exit(shipped === checksum ? 0 : 1);
}

const policy = loadModerationPolicy(loadConfig(process.env).moderationPolicyPath);
const sets = readTrainingSets().filter((s) => !values.without?.includes(s.name));
const encoded = sets.map((s) => encode(s, policy.vocabulary, options.bits));

/** Whether the rules alone refuse each sample of each set. */
async function rulesVerdicts(): Promise<boolean[][]> {
  const rules = embeddedModeration(policy, undefined, { classifier: false });
  const out: boolean[][] = [];
  for (const set of sets) {
    const verdicts: boolean[] = [];
    for (const s of set.samples)
      verdicts.push((await rules.moderate({ texts: [{ field: 'prompt', text: s.text }], preference: 'standard' })).flagged !== undefined);
    out.push(verdicts);
  }
  return out;
}

/** Whether the gate of `model` opens for a sample (as `mayJudge` reads it); --ungated: always. */
const opens = (model: ClassifierModel, e: Encoded) => values.ungated || e.foreign || e.stems.some((s) => model.signalSet!.has(s));

/** Each sample's harmful probability from a model trained without its set, and whether that model's gate opens for it. */
function leftOut(): { scores: number[][]; gates: boolean[][] } {
  const scores: number[][] = [];
  const gates: boolean[][] = [];
  encoded.forEach((_, left) => {
    const model = train(
      encoded.flatMap((e, i) => (i === left ? [] : e)),
      options,
    );
    scores.push(encoded[left]!.map((e: Encoded) => sigmoid(logit(model, e.features, 0))));
    gates.push(encoded[left]!.map((e: Encoded) => opens(model, e)));
  });
  return { scores, gates };
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

const rules = await rulesVerdicts();
const { scores, gates } = leftOut();
/** Whether the classifier refuses sample i of set f at `threshold` (it judges only texts of MIN_JUDGED_WORDS or more its gate opens for). */
const learned = (f: number, i: number, threshold: number) => gates[f]![i]! && scores[f]![i]! >= threshold && encoded[f]![i]!.features.words >= MIN_JUDGED_WORDS;
/** Refused by the two together: a rule that the classifier does not overrule, or the classifier. */
const combined = (threshold: number, overrule: number) =>
  sets.map((set, f) => tally(set, (i) => (rules[f]![i]! && scores[f]![i]! >= overrule) || learned(f, i, threshold)));
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

// For each bound of "confidently benign" that overrules no harmful text the rules refuse (an
// overrule may only take false positives away), the lowest threshold (most recall) whose pooled
// false positives stay within the margin; then the pair with the most recall.
let chosen = { threshold: 0.99, overrule: 0, recall: 0 };
for (const overrule of OVERRULE_BOUNDS) {
  const lost = overruledHarm(overrule);
  console.log(`overrule under ${overrule}: ${lost} harmful texts the rules refuse would pass`);
  if (lost > 0) continue;
  for (let t = 0.99; t >= 0.2; t = Math.round((t - 0.01) * 100) / 100) {
    const p = pooledPrompts(combined(t, overrule));
    if (p.refused / p.benign > MAX_FALSE_POSITIVES) break;
    if (p.caught / p.harmful > chosen.recall) chosen = { threshold: t, overrule, recall: p.caught / p.harmful };
  }
}
const { threshold, overrule } = chosen;

console.log(
  `\nleave-one-set-out validation (threshold ${threshold}, overrule under ${overrule}: the pair with the most recall whose pooled false positives stay ≤ ${100 * MAX_FALSE_POSITIVES} %)\n`,
);
console.log('| set | rules: recall | FP | hard-neg FP | classifier: recall | FP | hard-neg FP | both: recall | FP | hard-neg FP |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
const both = combined(threshold, overrule);
const rows = sets.map((set, f) => ({
  name: set.name,
  rules: tally(set, (i) => rules[f]![i]!),
  classifier: tally(set, (i) => learned(f, i, threshold)),
  both: both[f]!,
}));
for (const r of rows) console.log(`| ${r.name} | ${cells(r.rules)} | ${cells(r.classifier)} | ${cells(r.both)} |`);
console.log(
  `| **all prompt sets** | ${cells(pooledPrompts(rows.map((r) => r.rules)))} | ${cells(pooledPrompts(rows.map((r) => r.classifier)))} | ${cells(pooledPrompts(rows.map((r) => r.both)))} |`,
);

const gated = pooled(sets.map((set, f) => tally(set, (i) => gates[f]![i]!)));
console.log(
  `\nthe gate opened for ${pct(gated.caught, gated.harmful)} of harmful texts, ${pct(gated.refused, gated.benign)} of benign ones, ${pct(gated.hardRefused, gated.hard)} of hard negatives`,
);

const model = train(encoded.flat(), options);
if (values.ungated) delete model.signalSet;
console.log(`${model.signals!.length} signal stems${values.ungated ? ' (not used: --ungated)' : ''}`);
const final = { ...model, threshold, overrule };
for (const name of Object.values(OOD_FILES)) {
  const texts = readOod(name);
  const refused = await oodRefusals(embeddedModeration(policy, undefined, { classifier: final }), texts);
  const rules = await oodRefusals(embeddedModeration(policy, undefined, { classifier: false }), texts);
  console.log(`out of distribution, ${name}: ${refused.length}/${texts.length} refused (${pct(refused.length, texts.length)}; rules alone ${rules.length})`);
  for (const r of refused) console.log(`    ${JSON.stringify(r.text.slice(0, 160))} → ${r.categories.join(', ')}`);
}
if (dryRun) process.exit(0);
const header: ModelHeader = {
  bits: model.bits,
  outputs: model.outputs,
  bias: model.bias,
  scales: model.scales,
  threshold,
  overrule,
  trainingChecksum: checksum,
  training: { ...options, sets: sets.map((s) => s.name), samples: encoded.flat().length },
  signals: model.signals,
};
fs.writeFileSync(path.join(MODEL_DIR, MODEL_HEADER), `${JSON.stringify(header, null, 2)}\n`);
fs.writeFileSync(path.join(MODEL_DIR, MODEL_WEIGHTS), model.weights);
console.log(`\nwrote ${MODEL_HEADER} and ${MODEL_WEIGHTS} (${model.weights.length} bytes) in ${path.relative(process.cwd(), MODEL_DIR)}`);
