/** The README's code blocks, for tests that run them as a reader would. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';

export const README = path.resolve(import.meta.dirname, '../../README.md');

/** The first ```ts block after `heading` in the README. */
export function snippetAfter(heading: string): string {
  const readme = fs.readFileSync(README, 'utf8');
  const from = readme.indexOf(heading);
  assert.ok(from >= 0, `README has "${heading}"`);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(from));
  assert.ok(block, `a TypeScript block follows "${heading}"`);
  return block[1];
}

/** The README's quickstart in TypeScript: submit two 16:9 images, wait, save them to `out`. */
export const TEN_LINES = 'The same in ten lines of TypeScript';

/** What the ten lines print and save: the task and its identity, then two 16:9 PNGs in `outDir`. */
export async function assertTenLinesRan(stdout: string, outDir: string): Promise<void> {
  assert.match(stdout, /task task_\w+ \(\d+ Gems quoted, key gf-/);
  assert.match(stdout, /succeeded/);
  const saved = fs.readdirSync(outDir).sort();
  assert.equal(saved.length, 2);
  for (const name of saved) {
    const meta = await sharp(path.join(outDir, name)).metadata();
    assert.equal(meta.format, 'png');
    assert.ok(meta.width && meta.height && Math.abs(meta.width / meta.height - 16 / 9) < 0.01, `${meta.width}×${meta.height} is 16:9`);
  }
}
