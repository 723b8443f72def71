/**
 * The out-of-distribution corpus of the moderation classifier: broad benign text
 * unlike every labelled set it is trained on, on which it must refuse almost
 * nothing (docs/policies.md, "The learned classifier"). Two sources, both held
 * out of training for good:
 *
 * - every string literal of the test suite outside the moderation tests, their
 *   helpers and fixtures: test names, SQL, paths, log lines, ordinary prompts;
 * - sentences of the README of every package in node_modules: developer prose
 *   of every kind ("kills the child process", "exploits", "fires an event").
 *
 * `npm run eval:moderation -- --ood` reads them live; `--write` (or
 * `npm run eval:moderation -- --ood --write`) refreshes the committed copies in
 * test/fixtures/moderation-ood/, which test/unit/moderation-ood.test.ts holds the
 * shipped model to. Only texts of MIN_JUDGED_WORDS words or more are kept (the
 * classifier judges nothing shorter), and none the rules alone refuse
 * (`withoutRuleRefusals`): tests outside moderation post harmful prompts too (the console's
 * and the CLI's refusals), and the rules' own false positives are the labelled sets' to
 * measure, so what the corpus counts is what the classifier adds.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import type { ModerationProvider } from '../../server/providers/moderation/types.ts';

const ROOT = path.join(import.meta.dirname, '../..');
export const OOD_DIR = path.join(ROOT, 'test/fixtures/moderation-ood');
export const OOD_FILES = { testStrings: 'test-strings.json', readmes: 'readme-sentences.json' } as const;

/** Test files that are about moderation: their strings are harmful on purpose, or the sets' own. */
const MODERATION_FILE = /moderation|hostile-prompts|^unit\/policies\.test\.ts$/;

/** Words as the classifier counts them (letters or digits), enough to tell a three-word text. */
const wordCount = (text: string) => text.split(/[^\p{L}\p{N}]+/u).filter(Boolean).length;

/** The test suite's TypeScript files outside the moderation tests and the fixtures. */
export function testSuiteFiles(): string[] {
  const dir = path.join(ROOT, 'test');
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => f.endsWith('.ts') && !f.startsWith('fixtures/') && !f.startsWith('generated-clients/') && !MODERATION_FILE.test(f))
    .sort()
    .map((f) => `test/${f}`);
}

/** The string literals of one file (a template's text parts joined by a space where its expressions were). */
function literalsOf(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(path.join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) out.push(node.text);
    else if (ts.isTemplateExpression(node)) out.push([node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' '));
    else if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return; // module paths
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

export const distinctJudged = (texts: Iterable<string>) => [...new Set([...texts].map((t) => t.trim()).filter((t) => wordCount(t) >= 3))];

/** Every distinct string of the test suite (outside moderation) of three words or more, in file order. */
export function testSuiteStrings(): string[] {
  return distinctJudged(testSuiteFiles().flatMap(literalsOf));
}

/** A README's prose: code blocks, tables, HTML, links' targets and markup taken out, split into sentences. */
export function sentencesOf(markdown: string): string[] {
  const prose = markdown
    .replace(/```[\s\S]*?```/g, '\n')
    .replace(/<[^>]*>/g, ' ')
    .split('\n')
    .filter((line) => !/^\s*(\||#|!\[|\[!\[|[-=]{3,}|\s{4})/.test(line))
    .join('\n')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(^|[^\w*])([*_]{1,2})(\S[^*_]*?)\2(?![\w*])/g, '$1$3');
  return prose
    .split(/\n\s*\n/)
    .flatMap((paragraph) => paragraph.replace(/\s+/g, ' ').split(/(?<=[.!?])\s+(?=[A-Z])/))
    .map((s) => s.replace(/^[-*+>\d.)\s]+/, '').trim())
    .filter((s) => s.length <= 400 && /[a-z]/.test(s) && wordCount(s) <= 60);
}

/** Sentences of node_modules' READMEs (the top-level packages, sorted): at most `perPackage` of each. */
export function readmeSentences(perPackage = 8, nodeModules = path.join(ROOT, 'node_modules')): string[] {
  const packages = fs
    .readdirSync(nodeModules)
    .filter((d) => !d.startsWith('.'))
    .flatMap((d) => (d.startsWith('@') ? fs.readdirSync(path.join(nodeModules, d)).map((s) => `${d}/${s}`) : [d]))
    .sort();
  const out: string[] = [];
  for (const p of packages) {
    const dir = path.join(nodeModules, p);
    const readme = fs.existsSync(dir) ? fs.readdirSync(dir).find((f) => /^readme(\.md)?$/i.test(f)) : undefined;
    if (readme === undefined) continue;
    out.push(...distinctJudged(sentencesOf(fs.readFileSync(path.join(dir, readme), 'utf8'))).slice(0, perPackage));
  }
  return distinctJudged(out);
}

/** The committed corpus file `name` (a JSON list of texts). */
export function readOod(name: string): string[] {
  return JSON.parse(fs.readFileSync(path.join(OOD_DIR, name), 'utf8')) as string[];
}

/** Writes `texts` to the committed corpus file `name`, one text a line. */
export function writeOod(name: string, texts: string[]): void {
  fs.mkdirSync(OOD_DIR, { recursive: true });
  fs.writeFileSync(path.join(OOD_DIR, name), `[\n${texts.map((t) => JSON.stringify(t)).join(',\n')}\n]\n`);
}

/**
 * The share of an out-of-distribution corpus the shipped model may refuse. Every text is benign,
 * so each refusal is a false positive on text like what a service receives besides prompts.
 */
export const OOD_BOUND = 0.01;

/** The texts of `texts` that `provider` refuses (as an image prompt of a standard account), with the categories given. */
export async function oodRefusals(provider: ModerationProvider, texts: readonly string[]): Promise<Array<{ text: string; categories: string[] }>> {
  const out: Array<{ text: string; categories: string[] }> = [];
  for (const text of texts) {
    const verdict = await provider.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' });
    if (verdict.flagged !== undefined) out.push({ text, categories: verdict.flagged.categories });
  }
  return out;
}

/** `texts` less those `rules` (the embedded provider without its classifier) refuse. */
export async function withoutRuleRefusals(rules: ModerationProvider, texts: readonly string[]): Promise<string[]> {
  const refused = new Set((await oodRefusals(rules, texts)).map((r) => r.text));
  return texts.filter((t) => !refused.has(t));
}
