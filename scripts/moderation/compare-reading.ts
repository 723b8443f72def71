/**
 * Whether a change to the embedded moderation moved any reading or decision: the
 * code at `--before` (a commit, read with `git archive` into a temp dir) and this
 * checkout's, loaded side by side, each asked for every text below: the tokens
 * (word, stem, possessive), the categories at each strictness, the language
 * check and the provider's verdict (rules alone, and with the shipped
 * classifier). The texts: every string of every set under
 * test/fixtures/moderation/ (sub-folders included), the hostile shapes of
 * test/helpers/hostile-prompts.ts at several lengths and seeds, and random
 * mixed-script texts (look-alikes, invisible and combining characters,
 * full-width letters, leetspeak, policy words, other scripts). A speed pass
 * must print "identical"; the first differences are printed otherwise.
 *
 *   node --import tsx scripts/moderation/compare-reading.ts [--before main --random 6000]
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { rng } from '../../server/providers/random.ts';
import { hostilePrompt, PROMPT_SHAPES, type PromptShape } from '../../test/helpers/hostile-prompts.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** What one checkout's moderation says of a text, as one comparable string per text. */
type Reader = (text: string) => Promise<string>;

/** The moderation of the checkout at `dir` (the repository or an extracted commit) as a Reader. */
async function readerAt(dir: string): Promise<Reader> {
  const at = (file: string) => import(pathToFileURL(path.join(dir, 'server/providers/moderation', file)).href);
  const { loadModerationPolicy } = await at('policy-file.ts');
  const { categoriesOf, embeddedModeration } = await at('local.ts');
  const { tokenize, inDictionary } = await at('normalize.ts');
  const { stopWordDetector } = await at('language.ts');
  const policy = loadModerationPolicy(path.join(dir, 'server/catalog/moderation.yaml'));
  const languages = stopWordDetector(inDictionary);
  const rules = embeddedModeration(policy, languages, { classifier: false });
  const learned = embeddedModeration(policy, languages);
  return async (text) => {
    const tokens = (tokenize(text, policy.vocabulary) as Array<{ word: string; stem: string; possessive: boolean }>)
      .map((t) => `${t.word}/${t.stem}${t.possessive ? "/'" : ''}`)
      .join(' ');
    const categories = ['strict', 'standard', 'lenient'].map((p) => categoriesOf(policy, text, p).join(',')).join(' | ');
    const verdicts = [];
    for (const provider of [rules, learned])
      verdicts.push(JSON.stringify(await provider.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' })));
    return `${tokens}\n${categories}\n${languages.detect(text) ?? '-'}\n${verdicts.join('\n')}`;
  };
}

/** Every string of every YAML file under `dir`. */
function fixtureTexts(dir: string): string[] {
  const texts: string[] = [];
  const collect = (value: unknown): void => {
    if (typeof value === 'string') texts.push(value);
    else if (Array.isArray(value)) value.forEach(collect);
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(collect);
  };
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.yaml')) collect(YAML.parse(fs.readFileSync(path.join(entry.parentPath, entry.name), 'utf8')));
  }
  return texts;
}

/** Pieces random texts are made of: every kind of character the reading treats apart. */
const PIECES = [
  ...'abcdefghijklmnopqrstuvwxyzIKL0134578@$!|+€-._/,~*\'"`?():;',
  ...'аеорсухіїјԁɡ', // Cyrillic and other look-alikes
  ...'ａｂｋｉｌ', // full-width
  ...'\u200b\u200d\u2060\u00ad\u3164\u115f', // invisible and fillers
  ...'\u0301\u0308\u0327', // combining marks
  ...'éèçñüößæœøłđıþ’‘ʼ—–',
  ...'你好مرحبا', // other scripts
  '😀',
  '𝐤𝐢𝐥𝐥',
  ' ',
  ' ',
  ' ',
  '  ',
  '\n',
  "'s ",
  ' 12 year old ',
  ' 13yo ',
  ' kill ',
  ' bomb ',
  ' how to make a ',
  ' people ',
  ' children ',
  ' weapon ',
  ' kiII ',
  ' k i l l ',
  ' k.i.l.l ',
  ' |<ill ',
  ' murdr ',
  ' pipebomb ',
  ' killyourself ',
  ' the ',
  ' de la ',
  ' und ',
  ' shelter ',
];

function randomText(random: () => number): string {
  const length = 1 + Math.floor(random() * (random() < 0.1 ? 400 : 40));
  let text = '';
  for (let i = 0; i < length; i++) text += PIECES[Math.floor(random() * PIECES.length)];
  return text;
}

/** The texts compared: fixtures, hostile shapes (several lengths and seeds), random mixed-script texts. */
export function comparedTexts(randomCount: number): string[] {
  const texts = fixtureTexts(path.join(root, 'test/fixtures/moderation'));
  for (const shape of Object.keys(PROMPT_SHAPES) as PromptShape[]) {
    for (const length of [20, 200, 3_000, 30_000])
      for (let seed = 1; seed <= (length > 3_000 ? 3 : 8); seed++) texts.push(hostilePrompt(shape, length, seed * 7919 + length));
  }
  const random = rng(20261127);
  for (let i = 0; i < randomCount; i++) texts.push(randomText(random));
  return texts;
}

/** The checkout at `rev` extracted into `dir` (its server/ and package.json, this checkout's node_modules). */
function extract(rev: string, dir: string): void {
  const archive = execFileSync('git', ['archive', rev, 'server', 'package.json'], { cwd: root, maxBuffer: 256 << 20 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive, maxBuffer: 256 << 20 });
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { before: { type: 'string', default: 'main' }, random: { type: 'string', default: '6000' } } });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-compare-reading-'));
  try {
    extract(values.before, dir);
    const [before, now] = [await readerAt(dir), await readerAt(root)];
    const texts = comparedTexts(Number(values.random));
    let differ = 0;
    for (const text of texts) {
      const [was, is] = [await before(text), await now(text)];
      if (was === is) continue;
      if (++differ <= 5) console.log(`differs: ${JSON.stringify(text.slice(0, 200))}\n  ${values.before}: ${was.slice(0, 600)}\n  now: ${is.slice(0, 600)}`);
    }
    console.log(`${texts.length} texts compared with ${values.before}: ${differ === 0 ? 'identical' : `${differ} differ`}`);
    return differ === 0 ? 0 : 1;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
