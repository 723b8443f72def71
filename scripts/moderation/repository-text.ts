/**
 * Benign training text of the repository's own: the sentences of its documentation
 * (docs/*.md and the README, but not docs/policies.md, which quotes harmful requests)
 * and of the comments of server/ (but not of the moderation provider, which quotes them
 * too). Developer prose full of ordinary uses of frightening words ("a worker killed
 * outright", "a decompression bomb", "the process dies"), the kind of text the labelled
 * sets never held. Written to test/fixtures/moderation/train/repository.yaml by
 * `npm run train:moderation -- --repository-text`; never any text of the out-of-distribution
 * corpus (ood.ts), which stays held out.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import YAML from 'yaml';
import { SETS_DIR } from './eval-set.ts';
import { distinctJudged, OOD_FILES, readOod, sentencesOf } from './ood.ts';

const ROOT = path.join(import.meta.dirname, '../..');
export const REPOSITORY_SET = path.join(SETS_DIR, 'train/repository.yaml');

/** Pages that quote harmful requests on purpose. */
const QUOTING = new Set(['docs/policies.md']);

function documentation(): string[] {
  const pages = [
    'README.md',
    ...fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  return pages.filter((p) => !QUOTING.has(p)).flatMap((p) => sentencesOf(fs.readFileSync(path.join(ROOT, p), 'utf8')));
}

/** The comments of one source file, each as prose (markers and JSDoc tags' braces taken out). */
function commentsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  const out: string[] = [];
  let line: string[] = [];
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      out.push(
        ...sentencesOf(
          scanner
            .getTokenText()
            .replace(/^\/\*\*?|\*\/$/g, '')
            .replace(/^\s*\* ?/gm, ''),
        ),
      );
    } else if (kind === ts.SyntaxKind.SingleLineCommentTrivia) {
      line.push(scanner.getTokenText().replace(/^\/\/\s?/, ''));
      continue;
    } else if (kind === ts.SyntaxKind.NewLineTrivia || kind === ts.SyntaxKind.WhitespaceTrivia) {
      continue;
    }
    if (line.length > 0) out.push(...sentencesOf(line.join(' ')));
    line = [];
  }
  return out.map((s) => s.replace(/\{@link ([^}]*)\}/g, '$1'));
}

function serverComments(): string[] {
  const dir = path.join(ROOT, 'server');
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => f.endsWith('.ts') && !f.startsWith('providers/moderation/'))
    .sort()
    .flatMap((f) => commentsOf(path.join(dir, f)));
}

/** The repository's benign prose, less anything the out-of-distribution corpus holds. */
export function repositoryText(): string[] {
  const heldOut = new Set([...readOod(OOD_FILES.testStrings), ...readOod(OOD_FILES.readmes)]);
  return distinctJudged([...documentation(), ...serverComments()]).filter((t) => !heldOut.has(t));
}

export function writeRepositorySet(texts = repositoryText()): void {
  fs.writeFileSync(REPOSITORY_SET, YAML.stringify({ benign: { repository: texts } }, { lineWidth: 0 }));
}
