/**
 * Docs a newcomer can read: the README is the front door (a
 * few screens), and every relative link and anchor in the README and docs/
 * resolves to a file and a heading that exist.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const pages = [
  'README.md',
  ...fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('docs', () => {
  it('when the README is read, then it fits on a few screens (at most ~250 lines) and points to every docs page', () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    assert.ok(readme.split('\n').length <= 250, `${readme.split('\n').length} lines`);
    for (const page of pages.filter((p) => p.startsWith('docs/'))) assert.ok(readme.includes(`(${page}`), `README links ${page}`);
  });

  it('when a relative link or anchor appears in the README or docs, then its file and heading exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = fs.readFileSync(path.join(root, page), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: not ours to check offline
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const resolved = file === '' ? page : path.normalize(path.join(path.dirname(page), file));
        if (!fs.existsSync(path.join(root, resolved))) {
          broken.push(`${page}: ${target} (no file ${resolved})`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    assert.deepEqual(broken, []);
  });
});
