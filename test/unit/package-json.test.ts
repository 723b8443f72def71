/**
 * package.json read as text: JSON keeps only the last of two equal keys, so a merge
 * that brings a second "prepare" (or any script) silently drops the first one's work.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

it('when package.json is read as text, then no object in it names the same key twice', () => {
  const text = fs.readFileSync(path.resolve(import.meta.dirname, '../../package.json'), 'utf8');
  const open: Array<Set<string>> = [];
  const twice: string[] = [];
  // Walks the strings and braces; a string followed by ':' is a key of the innermost object.
  const token = /"((?:[^"\\]|\\.)*)"\s*(:)?|[{}]/g;
  for (const m of text.matchAll(token)) {
    if (m[0] === '{') open.push(new Set());
    else if (m[0] === '}') open.pop();
    else if (m[2]) {
      const keys = open.at(-1)!;
      if (keys.has(m[1]!)) twice.push(m[1]!);
      keys.add(m[1]!);
    }
  }
  assert.deepEqual(twice, []);
});
