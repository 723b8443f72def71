/**
 * npm run eval:moderation [-- --set NAME] [-- --quiet] [-- --unseen] [-- --dir DIR] [-- --rules]
 * npm run eval:moderation -- --ood [--write] [--quiet]
 *
 * Measures moderation on the labelled sets of test/fixtures/moderation/ (with
 * --unseen, those of test/fixtures/moderation/unseen/: sets nobody has tuned
 * the policy on, kept apart so that the unit test's targets do not apply to them;
 * with --dir, the sets of that folder, e.g. test/fixtures/moderation/blind/):
 * recall per harmful category and the false-positive rate on benign text,
 * for the embedded policy (MODERATION_POLICY_PATH or the shipped one) and,
 * when MODERATION_URL is set, for that OpenAI-compatible endpoint too; lists
 * every miss and every false positive. Exits 1 when the embedded policy
 * misses a target (recall ≥ 95 %, false positives ≤ 1 %) on any set.
 * The embedded policy is measured as the server runs it, its rules and its
 * learned classifier together; with --rules, its rules alone.
 *
 * With --ood, the out-of-distribution gate instead (scripts/moderation/ood.ts): the
 * embedded policy, classifier on, over broad benign text it was never trained on (every
 * string of the test suite outside moderation, read now; sentences of node_modules'
 * READMEs), printing the refusal rate and every refused text; exits 1 above OOD_BOUND.
 * --write refreshes the committed copies the unit test reads.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { embeddedModeration } from '../server/providers/moderation/local.ts';
import { openAiCompatibleModeration } from '../server/providers/moderation/openai.ts';
import type { ModerationProvider } from '../server/providers/moderation/types.ts';
import { readSets, score, TARGETS, UNSEEN_DIR, type Score } from './moderation/eval-set.ts';
import { readTrainingSets } from './moderation/train.ts';
import { OOD_BOUND, OOD_FILES, oodRefusals, readmeSentences, testSuiteStrings, withoutRuleRefusals, writeOod } from './moderation/ood.ts';

const { values } = parseArgs({
  options: {
    set: { type: 'string' },
    quiet: { type: 'boolean', default: false },
    rules: { type: 'boolean', default: false },
    unseen: { type: 'boolean', default: false },
    dir: { type: 'string' },
    ood: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
  },
});

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const visible = (text: string) => JSON.stringify(text); // escapes invisible characters, so a miss can be read

function report(provider: string, s: Score, quiet: boolean): boolean {
  const met = s.recall >= TARGETS.recall && s.falsePositiveRate <= TARGETS.falsePositiveRate;
  console.log(
    `\n## ${provider} on ${s.set}: recall ${pct(s.recall)} (target ≥ ${pct(TARGETS.recall)}), false positives ${pct(s.falsePositiveRate)} (target ≤ ${pct(TARGETS.falsePositiveRate)}) — ${met ? 'MET' : 'MISSED'}`,
  );
  for (const g of s.harmful)
    console.log(`  harmful ${g.group.padEnd(18)} ${String(g.refused).padStart(4)}/${String(g.total).padEnd(4)} refused  ${pct(g.refused / g.total)}`);
  for (const g of s.benign)
    console.log(`  benign  ${g.group.padEnd(18)} ${String(g.refused).padStart(4)}/${String(g.total).padEnd(4)} refused  ${pct(g.refused / g.total)}`);
  if (!quiet) {
    if (s.misses.length > 0) console.log(`  misses (harmful, let through):`);
    for (const m of s.misses) console.log(`    [${m.group}] ${visible(m.text)}`);
    if (s.falsePositives.length > 0) console.log(`  false positives (benign, refused):`);
    for (const f of s.falsePositives) console.log(`    [${f.group}] ${visible(f.text)} → ${f.categories.join(', ')}`);
  }
  return met;
}

const config = loadConfig(process.env);
const policy = loadModerationPolicy(config.moderationPolicyPath);

if (values.ood) {
  const rules = embeddedModeration(policy, undefined, { classifier: false });
  // Held out means never trained on: a text a training set happens to hold too is left out here.
  const trained = new Set(readTrainingSets().flatMap((set) => set.samples.map((s) => s.text.trim())));
  const heldOut = async (texts: string[]) => (await withoutRuleRefusals(rules, texts)).filter((t) => !trained.has(t));
  const corpora: Array<[string, string[]]> = [
    [OOD_FILES.testStrings, await heldOut(testSuiteStrings())],
    [OOD_FILES.readmes, await heldOut(readmeSentences())],
  ];
  let within = true;
  for (const [name, texts] of corpora) {
    if (values.write) writeOod(name, texts);
    const refused = await oodRefusals(values.rules ? rules : embeddedModeration(policy), texts);
    const rate = refused.length / texts.length;
    within &&= rate <= OOD_BOUND;
    console.log(
      `\n## embedded on ${name} (out of distribution, all benign): ${refused.length}/${texts.length} refused, ${pct(rate)} (bound ≤ ${pct(OOD_BOUND)})`,
    );
    if (!values.quiet) for (const r of refused) console.log(`    ${visible(r.text)} → ${r.categories.join(', ')}`);
  }
  process.exit(within ? 0 : 1);
}
const providers: Array<[string, ModerationProvider, number]> = [
  values.rules ? ['embedded (rules alone)', embeddedModeration(policy, undefined, { classifier: false }), 1] : ['embedded', embeddedModeration(policy), 1],
];
if (config.moderationUrl) {
  providers.push([
    `upstream ${config.moderationUrl}`,
    openAiCompatibleModeration(policy, { url: config.moderationUrl, apiKey: config.moderationApiKey, model: config.moderationModel }),
    8,
  ]);
}
const setDir = values.dir ?? (values.unseen ? UNSEEN_DIR : undefined);
const sets = readSets(setDir).filter((s) => !values.set || s.name === values.set);
if (sets.length === 0) {
  console.error(`no set named ${values.set} in ${setDir ?? 'test/fixtures/moderation/'}`);
  process.exit(2);
}
let allMet = true;
for (const [name, provider, concurrency] of providers) {
  for (const set of sets) {
    try {
      const met = report(name, await score(set, provider, concurrency), values.quiet ?? false);
      if (name.startsWith('embedded')) allMet &&= met;
    } catch (error) {
      console.log(`\n## ${name} on ${set.name}: could not be measured: ${(error as Error).message}`);
    }
  }
}
process.exit(allMet ? 0 : 1);
