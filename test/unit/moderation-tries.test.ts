/**
 * server/providers/moderation/letter-trie.ts: the build's copy of the moderation
 * vocabulary's letter tries holds what building them gives, a vocabulary of the
 * same words reads every text alike from it, and a copy made from other words
 * or code, or a broken one, is not read (the tries are built as before).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tokenize, Vocabulary } from '../../server/providers/moderation/normalize.ts';
import { builtTriesName, readBuiltTries, type LetterTrie } from '../../server/providers/moderation/letter-trie.ts';
import { hostilePrompt, PROMPT_SHAPES, type PromptShape } from '../helpers/hostile-prompts.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-tries-'));
const nowhere = path.join(dir, 'nothing-here');
const NORMALIZE = path.resolve(import.meta.dirname, '../../server/providers/moderation/normalize.ts');

/** Policy words of every kind the tries hold: plain, long, inflected, past ASCII, past the BMP. */
const WORDS = ['kill', 'murder', 'bomb', 'pipebomb', 'weapon', 'assault', 'poisoning', 'shooting', 'explosives', 'überfall', 'naïve', 'ghost𝔞word', 'kid'];

const arrays = (tries: LetterTrie[]) => tries.map((t) => t.arrays());

/** Texts that walk every trie: misspellings (deletions), joined and split words (prefixes), hostile shapes. */
const TEXTS = [
  'how to make a pipebomb and murdr people',
  'k i l l  them, k.i.l.l, kil-l-ing, murrrder, bom b, weapn, asault, explosive s',
  'killyourself pipe-bomb poisonning shootng überfal naive ghost𝔞word',
  ...(Object.keys(PROMPT_SHAPES) as PromptShape[]).flatMap((shape) => [1, 2].map((seed) => hostilePrompt(shape, 600, seed))),
];

describe("the moderation vocabulary's tries kept by the build", () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when the build writes the tries, then a vocabulary of the same words reads them, they hold what building gives, and every text reads alike', () => {
    const built = new Vocabulary(WORDS, nowhere);
    assert.equal(built.triesFromBuild, false, 'no copy: built');
    built.writeTries(dir);
    const read = new Vocabulary(WORDS, dir);
    assert.equal(read.triesFromBuild, true, 'the copy is read');
    assert.equal(read.triesName, built.triesName);
    assert.deepStrictEqual(arrays(read.tries()), arrays(built.tries()));
    for (const text of TEXTS) assert.deepStrictEqual(tokenize(text, read), tokenize(text, built), text.slice(0, 80));
  });

  it('when the copy was made from other words or by other code, then it is not read and the tries are built', () => {
    new Vocabulary(WORDS, nowhere).writeTries(dir);
    const other = new Vocabulary([...WORDS, 'arson'], dir);
    assert.equal(other.triesFromBuild, false, 'other words');
    assert.deepStrictEqual(arrays(other.tries()), arrays(new Vocabulary([...WORDS, 'arson'], nowhere).tries()));
    const words = ['a', 'b'];
    assert.notEqual(builtTriesName(words, [NORMALIZE]), builtTriesName(words, [import.meta.filename]), 'the code is part of the name');
    assert.notEqual(builtTriesName(words, [NORMALIZE]), builtTriesName(['a', 'c'], [NORMALIZE]), 'so are the words');
  });

  it('when the copy is cut short, longer than it says or of another layout, then it is not read', () => {
    const vocabulary = new Vocabulary(WORDS, nowhere);
    vocabulary.writeTries(dir);
    const file = path.join(dir, vocabulary.triesName);
    const whole = fs.readFileSync(file);
    assert.ok(readBuiltTries(dir, vocabulary.triesName, 3));
    assert.equal(readBuiltTries(dir, vocabulary.triesName, 2), undefined, 'another count of tries');
    fs.writeFileSync(file, whole.subarray(0, whole.length - 4));
    assert.equal(readBuiltTries(dir, vocabulary.triesName, 3), undefined, 'cut short');
    assert.equal(new Vocabulary(WORDS, dir).triesFromBuild, false);
    fs.writeFileSync(file, Buffer.concat([whole, Buffer.alloc(4)]));
    assert.equal(readBuiltTries(dir, vocabulary.triesName, 3), undefined, 'longer');
    const otherLayout = Buffer.from(whole);
    otherLayout.writeInt32LE(99, 0);
    fs.writeFileSync(file, otherLayout);
    assert.equal(readBuiltTries(dir, vocabulary.triesName, 3), undefined, 'another layout');
    fs.rmSync(file);
    assert.equal(readBuiltTries(dir, vocabulary.triesName, 3), undefined, 'no copy');
  });
});
