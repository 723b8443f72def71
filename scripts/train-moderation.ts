/**
 * npm run train:moderation [-- --check] [-- --dry-run [--ungated] [--signal-ratio R] [--signal-min N] [--signal-share S] [--paired-share P] [--without SET]]
 *   [-- --gates] [-- --threshold T [--overrule O]] [-- --repository-text]
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
 * figures for other options (--ungated: no gate; --signal-ratio, --signal-min, --signal-share,
 * --paired-share: the gate's stems, train.ts `gateOf`; --without SET, a set file left out of
 * training, e.g. train/repository). With --gates nothing is written: gates of several signal and
 * paired shares side by side (validation, the threshold each would choose, and the final
 * model's out-of-distribution refusals behind each), from one training.
 * With --threshold (and --overrule) the validation is skipped and the final model is written with
 * the threshold and bound a full run (or --gates, for the gate the options give) printed for
 * these sets and options: training is deterministic, so the files are those the full run writes.
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
  DEFAULT_OPTIONS,
  encode,
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
    'repository-text': { type: 'boolean', default: false },
    without: { type: 'string', multiple: true },
  },
});
const GATE_FLAGS = ['signal-ratio', 'signal-min', 'signal-share', 'paired-share', 'foreign-share'] as const;
const dryRun =
  values['dry-run'] ||
  values.ungated ||
  values.gates ||
  values['foreign-gates'] ||
  GATE_FLAGS.some((f) => values[f] !== undefined) ||
  values.without !== undefined;

/** The leave-one-set-out false-positive rate the threshold must keep (a margin under the 2 % target on unseen sets). */
const MAX_FALSE_POSITIVES = 0.015;
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

/** Per sample, its distinct stems as tokens (what `mayJudge` reads). */
const stemTokens = encoded.map((e) => e.map((x) => x.stems.map((stem) => ({ stem }))));
/** Whether `gate` opens for sample i of set f (as `mayJudge` reads it); --ungated: always. */
const opens = (gate: Pick<ClassifierModel, 'signalSet' | 'pairedSet'>, f: number, i: number) =>
  values.ungated || mayJudge(gate, stemTokens[f]![i]!, encoded[f]![i]!.foreign);

/** Each sample's harmful probability from a model trained without its set. */
function leftOutScores(): number[][] {
  return encoded.map((_, left) => {
    const model = train(
      encoded.flatMap((e, i) => (i === left ? [] : e)),
      options,
    );
    return encoded[left]!.map((e: Encoded) => sigmoid(logit(model, e.features, 0)));
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
  // The threshold and overrule bound a validation run already chose for these sets and options
  // (training is deterministic, so the same run would choose them again): the final model alone.
  const model = train(encoded.flat(), options);
  const chosen = { ...model, threshold: Number(values.threshold), overrule: Number(values.overrule ?? 0) };
  writeModel(chosen);
  process.exit(0);
}

const rules = await rulesVerdicts();
const scores = leftOutScores();
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
  /** Refused by the two together: a rule that the classifier does not overrule, or the classifier. */
  const combined = (threshold: number, overrule: number) =>
    sets.map((s, f) => tally(s, (i) => (rules[f]![i]! && scores[f]![i]! >= overrule) || learned(f, i, threshold)));
  // For each bound of "confidently benign" that overrules no harmful text the rules refuse (an
  // overrule may only take false positives away), the lowest threshold (most recall) whose pooled
  // false positives stay within the margin; then the pair with the most recall.
  let chosen = { threshold: 0.99, overrule: 0, recall: 0 };
  for (const overrule of OVERRULE_BOUNDS) {
    if (overruledHarm(overrule) > 0) continue;
    for (let t = 0.99; t >= 0.2; t = Math.round((t - 0.01) * 100) / 100) {
      const p = pooledPrompts(combined(t, overrule));
      if (p.refused / p.benign > MAX_FALSE_POSITIVES) break;
      if (p.caught / p.harmful > chosen.recall) chosen = { threshold: t, overrule, recall: p.caught / p.harmful };
    }
  }
  const { threshold, overrule } = chosen;
  const both = combined(threshold, overrule);
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
    both: foreignOnly((f, i) => (rules[f]![i]! && scores[f]![i]! >= overrule) || learned(f, i, threshold)),
    gated: foreignOnly((f, i) => gates[f]![i]!),
  };
  return { threshold, overrule, rows, gated, foreign };
}
for (const overrule of OVERRULE_BOUNDS) console.log(`overrule under ${overrule}: ${overruledHarm(overrule)} harmful texts the rules refuse would pass`);
const model = train(encoded.flat(), options);
if (values.ungated) {
  delete model.signalSet;
  delete model.pairedSet;
}

/** The out-of-distribution refusals of `classifier` (measured, never trained or chosen on). */
async function outOfDistribution(classifier: ClassifierModel, print: boolean): Promise<Array<Array<{ text: string; categories: string[] }>>> {
  const all: Array<Array<{ text: string; categories: string[] }>> = [];
  for (const name of Object.values(OOD_FILES)) {
    const texts = readOod(name);
    const refused = await oodRefusals(embeddedModeration(policy, undefined, { classifier }), texts);
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

const { threshold, overrule, rows, gated, foreign } = validate(options);
console.log(
  `\nleave-one-set-out validation (threshold ${threshold}, overrule under ${overrule}: the pair with the most recall whose pooled false positives stay ≤ ${100 * MAX_FALSE_POSITIVES} %)\n`,
);
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
await outOfDistribution(final, true);
if (dryRun) process.exit(0);
writeModel(final);

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
