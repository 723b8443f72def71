/**
 * The embedded moderation policy's work grows linearly with the text: a
 * property over prompts shaped to make it work hard (pieces joined by
 * punctuation, spelt-out letters, leetspeak, look-alike Unicode, letter runs,
 * trigger words) up to the 30,000 characters a prompt may hold. Work is counted,
 * not timed (normalize.ts `work`: characters looked up and occurrences visited),
 * so the property holds on a busy machine; `npm run bench:moderation` reports
 * the time.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import fc from 'fast-check';
import { loadModerationPolicy, parseModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import { categoriesOf } from '../../server/providers/moderation/local.ts';
import { work } from '../../server/providers/moderation/normalize.ts';
import { hostilePrompt, PROMPT_SHAPES, type PromptShape } from '../helpers/hostile-prompts.ts';

const policy = loadModerationPolicy(path.join(import.meta.dirname, '../../server/catalog/moderation.yaml'));
const SHAPES = Object.keys(PROMPT_SHAPES) as PromptShape[];
/** Work per character of text; the shapes measure 0.1–5 (the cubic merge did millions at 3,000 characters). */
const PER_CHARACTER = 25;
const CONSTANT = 5_000;

function workOf(text: string): number {
  const before = work.steps;
  categoriesOf(policy, text, 'strict');
  return work.steps - before;
}

describe('moderation work', () => {
  it('when prompts of any hostile shape grow to 30,000 characters, then the work stays within a constant per character', () => {
    fc.assert(
      fc.property(fc.constantFrom(...SHAPES), fc.integer({ min: 200, max: 30_000 }), fc.nat(), (shape, length, seed) => {
        const steps = workOf(hostilePrompt(shape, length, seed));
        assert.ok(steps <= PER_CHARACTER * length + CONSTANT, `${shape}, ${length} characters: ${steps} steps`);
      }),
      { numRuns: 40 },
    );
  });

  it('when a prompt is ten times longer, then its work is at most about ten times more', () => {
    // Each on a policy of its own: what one text leaves in the vocabulary's caches would make the next cheap.
    const fresh = () => loadModerationPolicy(path.join(import.meta.dirname, '../../server/catalog/moderation.yaml'));
    const workOn = (own: ReturnType<typeof fresh>, text: string) => {
      const before = work.steps;
      categoriesOf(own, text, 'strict');
      return work.steps - before;
    };
    for (const shape of SHAPES) {
      const short = workOn(fresh(), hostilePrompt(shape, 3_000, 1));
      const long = workOn(fresh(), hostilePrompt(shape, 30_000, 2));
      assert.ok(long <= 10 * short * 1.5 + CONSTANT, `${shape}: ${short} steps at 3,000 characters, ${long} at 30,000`);
    }
  });

  it('when text is full of capital Is for l, lone digits beside leetspeak and invisible fillers, then the work stays within a constant per character', () => {
    const pieces = ['kiII', 'Iet', '4', '1', 'w4nt', 'b\u3164o\u3164mb', 'sIaughter', 'aIIIIIIIIb', 'I', 'm4k3', 'II', 'xIxIxIxIxIxIxIxIxIxIxIxI'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { minLength: 20, maxLength: 60 }), fc.integer({ min: 200, max: 30_000 }), (pattern, length) => {
        let text = '';
        for (let i = 0; text.length < length; i++) text += `${pattern[i % pattern.length]} `;
        const steps = workOf(text);
        assert.ok(steps <= PER_CHARACTER * text.length + CONSTANT, `${text.length} characters: ${steps} steps`);
      }),
      { numRuns: 20 },
    );
  });

  it('when a policy phrase is longer than the matcher looks back, then the policy does not load', () => {
    const long = Array.from({ length: 17 }, (_, i) => `w${String.fromCharCode(97 + i)}ord`).join(' ');
    assert.throws(
      () => parseModerationPolicy({ categories: [{ id: 'test', description: 'test', strictness: 'standard', terms: [long] }] }, 'inline.yaml'),
      /more than 16 words/,
    );
  });
});
