/**
 * Comments, tests and docs give the reason, not a pointer to where it was
 * decided: the repository holds neither the issue tracker nor the style
 * document, so a citation of a tracker issue or a numbered style habit leaves
 * its reader with nothing. Read off the sources, so a new citation fails here
 * naming the file and line. An issue of another project's repository is fine
 * when it is named as such: a word before it (the project, or "its") and a `#`
 * before the number.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FOLDERS = ['server', 'client', 'scripts', 'test', 'docs', 'openapi'];
const TEXT_FILES = /\.(ts|mts|mjs|js|sh|md|html|css)$/;
/** Not prose: installed packages, what `npm run generate` writes and the client's build (client/dist), labelled sets, released contracts. */
const SKIPPED_DIRS = new Set(['node_modules', 'generated', 'dist', 'fixtures', 'released']);
const ISSUE = 'issue';
// Spelt in parts, so that this file does not cite what it looks for.
const STYLE_DOC = 'STY' + 'LE';
const HABIT = 'hab' + 'it';
const STYLE_CITATION = new RegExp(`\\b${STYLE_DOC}\\s+${HABIT}s?\\b|\\b[Hh]${HABIT.slice(1)}s?\\s+#?\\d+`, 'g');

/** Every file to read, relative to the repository root. */
function sources(): string[] {
  const found = ['README.md'];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(rel);
      } else if (TEXT_FILES.test(entry.name) || (dir === 'openapi' && entry.name.endsWith('.yaml'))) {
        found.push(rel);
      }
    }
  };
  for (const folder of FOLDERS) walk(folder);
  return found;
}

/** Words that make "word issue #N" a citation of our own tracker rather than a named project's. */
const NOT_A_PROJECT = new Set(['see', 'in', 'per', 'our', 'gemforge', 'the', 'this', 'by', 'from', 'of', 'and', 'or', 'cf', 'under']);

/** The tracker or style citations in `text` that start before `limit`. */
function citationsIn(text: string, limit = text.length): string[] {
  const found: string[] = [];
  const issue = new RegExp(String.raw`(?:([\w.@/-]+)\s+)?\b(${ISSUE}s?)\s+(#?)\d+`, 'gi');
  for (const m of text.matchAll(issue)) {
    const start = m.index + (m[1] ? m[0].indexOf(m[2]!, m[1].length) : 0);
    if (start >= limit) continue;
    const named = m[3] === '#' && m[1] !== undefined && !NOT_A_PROJECT.has(m[1].toLowerCase());
    if (!named) found.push(m[0].slice(start - m.index));
  }
  // The style document's name in capitals before the word is a citation; the word in prose is fine.
  for (const m of text.matchAll(STYLE_CITATION)) {
    if (m.index < limit) found.push(m[0]);
  }
  return found;
}

/** The citations in `lines`, as "line: text"; a citation may wrap onto the next comment line. */
function citationsInLines(lines: string[]): string[] {
  return lines.flatMap((line, i) => {
    const next = (lines[i + 1] ?? '').replace(/^\s*(?:\*|\/\/|#|-)?\s*/, '');
    return citationsIn(`${line} ${next}`, line.length).map((c) => `${i + 1}: ${c}`);
  });
}

/** Every citation in the file, as "file:line: text". */
function citations(file: string): string[] {
  return citationsInLines(fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')).map((c) => `${file}:${c}`);
}

describe('no tracker references', () => {
  it('when a citation is written, then the matcher finds it, also wrapped onto the next line, and lets another project named with # pass', () => {
    assert.deepEqual(citationsIn(`(${ISSUE} 27, item 2)`), [`${ISSUE} 27`]);
    assert.deepEqual(citationsIn(`see ${ISSUE}s 13`), [`${ISSUE}s 13`]);
    assert.deepEqual(citationsInLines([` * relies on (${ISSUE}`, ' * 31, item 2). Each']), [`1: ${ISSUE} 31`]);
    assert.equal(citationsIn(`${STYLE_DOC} ${HABIT} 8`).length, 1);
    assert.equal(citationsIn(`see ${ISSUE} #12`).length, 1);
    assert.deepEqual(citationsIn(`openapi-fetch ${ISSUE} #123 and its ${ISSUE}s #1389/#1550`), []);
    assert.deepEqual(citationsIn(`an ${ISSUE} with the pool; a bad ${'habit'}`), []);
  });

  it('when the sources, tests, scripts and docs are read, then none cites a tracker issue or a style habit (say the reason instead)', () => {
    const files = sources();
    assert.ok(files.length > 100, `read ${files.length} files`);
    assert.deepEqual(files.flatMap(citations), []);
  });
});
