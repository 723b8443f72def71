/**
 * The embedded policy's reading takes shortcuts for speed (normalize.ts); each
 * must give what the longer way gives, so that no decision moves with them:
 * two words run together are found without the table of every split, a word is
 * known not to inflect a policy word from its first two letters, the
 * dictionary's filter never turns a word away, and a text is folded, split at
 * white space, and a chunk trimmed and cut into pieces, by code point as the
 * expressions they replace did.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import wordListPath from 'word-list';
import { loadModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import {
  bodyPieces,
  fold,
  foldChar,
  foldEach,
  inDictionary,
  porterStem,
  squeeze,
  stemOf,
  trimChunk,
  whitespaceSplit,
  withoutCodePoints,
} from '../../server/providers/moderation/normalize.ts';
import { INVISIBLE_LETTERS } from '../../server/providers/moderation/look-alikes.ts';

const policy = loadModerationPolicy(path.join(import.meta.dirname, '../../server/catalog/moderation.yaml'));
const vocabulary = policy.vocabulary;
const dictionary = fs.readFileSync(wordListPath, 'utf8').split('\n').filter(Boolean);
/** The pieces bodyPieces hands out, in order. */
const piecesOf = (body: string) => {
  const out: string[] = [];
  bodyPieces(body, (p) => out.push(p));
  return out;
};
/** Words the policy knows, to build runs that do split. */
const known = [...new Set(dictionary.filter((w) => w.length >= 3 && w.length <= 9 && vocabulary.knows(w)))];

describe('moderation reading shortcuts', () => {
  it('when a run of letters is no word, then the two words it is split into are those of the full segmentation', () => {
    const part = fc.oneof(fc.constantFrom(...known), fc.stringMatching(/^[a-z]{1,6}$/));
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 3 }), fc.constantFrom('', 'ing', 'ed', 's', 'er', 'ness'), (parts, ending) => {
        const run = parts.join('') + ending;
        fc.pre(!vocabulary.knows(run));
        const split = vocabulary.segment(run);
        const expected = split !== undefined && split.length === 2 ? split[0]!.length : undefined;
        assert.equal(vocabulary.splitInTwo(run), expected, run);
      }),
      { numRuns: 3000 },
    );
  });

  it('when any dictionary word is stemmed, then its stem begins with its first two letters (what knows() relies on to skip stemming)', () => {
    const moved = dictionary.filter((w) => w.length >= 4 && /^[a-z]{2}/.test(w) && stemOf(w).slice(0, 2) !== w.slice(0, 2));
    assert.deepEqual(moved.slice(0, 10), []);
  });

  it('when a word is asked of knows(), then the answer is that of its stem looked up without the shortcut', () => {
    // The vocabulary's own sets, read past `private` to state what knows() must answer.
    const { words, stems } = vocabulary as unknown as { words: Set<string>; stems: Set<string> };
    const word = fc.oneof(fc.constantFrom(...known), fc.stringMatching(/^[a-z]{2,8}$/));
    fc.assert(
      fc.property(word, fc.constantFrom('', 'ing', 'ed', 's', 'es', 'er', 'ers', 'ation', 'ize', 'ised', 'ly'), (base, ending) => {
        const w = base + ending;
        assert.equal(vocabulary.knows(w), words.has(w) || (w.length >= 4 && stems.has(stemOf(w))), w);
      }),
      { numRuns: 5000 },
    );
  });

  it('when every dictionary word is looked up, then the filter in front of the dictionary lets each one through', () => {
    const missing = dictionary.filter((w) => !inDictionary(w));
    assert.deepEqual(missing.slice(0, 10), []);
  });

  it('when a word is squeezed, then the copy-free way gives what collapsing repeated characters gives', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'b', 'l', 'o', 'é', '😀', '\ud835', 'x') }), (word) => {
        assert.equal(squeeze(word), word.replace(/(.)\1+/gu, '$1'));
      }),
      { numRuns: 3000 },
    );
  });

  it('when a chunk is trimmed and cut into pieces by code point, then the pieces are those of the expressions', () => {
    // Letters, digits, leetspeak symbols, apostrophes, punctuation, look-alikes, marks, astral letters and lone surrogates.
    const unit = fc.constantFrom(
      'a',
      'Z',
      '7',
      '$',
      '@',
      '|',
      '!',
      '€',
      '+',
      "'",
      '-',
      '.',
      '—',
      '_',
      'é',
      'ｋ',
      '\u0301',
      'ß',
      '\ud835\udc1a',
      '\ud83d\ude00',
      '\ud835',
      '\udc1a',
      '\u200b',
      '٣',
      'ж',
    );
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 24 }), (chunk) => {
        const body = chunk.replace(/^[^\p{L}\p{N}$@|!€+]+|[^\p{L}\p{N}']+$/gu, '');
        assert.equal(trimChunk(chunk), body, JSON.stringify(chunk));
        assert.deepEqual(piecesOf(body), body.split(/[^\p{L}\p{N}$@|!€+]+/u).filter(Boolean), JSON.stringify(body));
        assert.deepEqual(piecesOf(chunk), chunk.split(/[^\p{L}\p{N}$@|!€+]+/u).filter(Boolean), JSON.stringify(chunk));
      }),
      { numRuns: 20000 },
    );
  });

  it('when a word ends in a letter no suffix rule ends with, then its stem is what the stemmer gives (the shortcut stemOf takes)', () => {
    const endsOwn = (w: string) => w.length > 3 && /[abfhjkopqvwxz]$/.test(w);
    const moved = dictionary.filter((w) => endsOwn(w) && stemOf(w) !== porterStem(w));
    assert.deepEqual(moved.slice(0, 10), []);
    const word = fc.oneof(
      fc.constantFrom(...known),
      fc.stringMatching(/^[a-zA-Z]{1,9}$/),
      fc.string({ unit: fc.constantFrom('y', 'e', 's', 'i', 'z', 'Y', 'ı', 'é', 'ss', 'ing', 'ed', 'at', 'iz', 'bl') }),
    );
    fc.assert(
      fc.property(word, fc.constantFrom(...'abfhjkopqvwxz'), (base, last) => {
        const w = base + last;
        assert.equal(stemOf(w), w.length <= 3 ? w : porterStem(w), w);
      }),
      { numRuns: 20000 },
    );
  });

  it('when a text is folded by code point, then it is what the expressions gave', () => {
    /** fold as it was written with expressions: what the walks by code point must give. */
    const byExpressions = (text: string) => {
      if (/^[\t\n\r\x20-\x7e]*$/.test(text)) return text.toLowerCase().replace(/`/g, "'");
      const lower = text
        .normalize('NFKC')
        .toLowerCase()
        .replace(/\p{Cf}+/gu, '')
        .replace(INVISIBLE_LETTERS, '');
      const out = lower.replace(/[^\x00-\x5f\x61-\x7f]/gu, foldChar);
      return /^[\x00-\x7f]*$/.test(out)
        ? out
        : out
            .normalize('NFD')
            .replace(/\p{M}+/gu, '')
            .normalize('NFC');
    };
    // Invisible characters and fillers, marks, look-alikes, full-width letters, ligatures, Hangul, astral letters, tags and lone surrogates.
    const unit = fc.oneof(
      fc.constantFrom(
        'a',
        'K',
        '`',
        ' ',
        '-',
        '\u200b',
        '\u00ad',
        '\ufeff',
        '\u3164',
        '\uffa0',
        '\u115f',
        '\u2800',
        '\u0301',
        '\u0308',
        'é',
        'ß',
        'ŀ',
        'ｋ',
        'ﬁ',
        '—',
        'у',
        'Ꮶ',
        'İ',
        'Σ',
        '\u1100',
        '\u1161',
        '\u11a8',
        '가',
        '\ud835\udc1a',
        '\udb40\udc01',
        '\ud835',
        '\udc1a',
        '\udb40',
      ),
      fc.integer({ min: 0x80, max: 0x2fff }).map((c) => String.fromCharCode(c)),
    );
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 16 }), (text) => {
        assert.equal(fold(text), byExpressions(text), JSON.stringify(text));
      }),
      { numRuns: 30000 },
    );
    // The walks skip ASCII: no ASCII character is a format character or a mark.
    for (let c = 0; c < 0x80; c++) assert.ok(!/\p{Cf}|\p{M}/u.test(String.fromCharCode(c)), `U+${c.toString(16)}`);
    assert.equal(withoutCodePoints('a\u200bb', { has: (c) => c === 0x200b }), 'ab');
    assert.equal(foldEach('a`b'), "a'b");
  });

  it('when a text is split at white space by code, then its chunks are those of the expression', () => {
    const byExpression = (text: string) => text.split(/\s+/u).filter(Boolean);
    // Every code unit, between letters and at the ends.
    for (let c = 0; c <= 0xffff; c++) {
      const unit = String.fromCharCode(c);
      for (const text of [`a${unit}b`, `${unit}a${unit}${unit}`]) assert.deepEqual(whitespaceSplit(text), byExpression(text), `U+${c.toString(16)}`);
    }
    const unit = fc.constantFrom('a', 'b', ' ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u200b', '\ud835', '\udc1a', '\ud835\udc1a');
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 24 }), (text) => {
        assert.deepEqual(whitespaceSplit(text), byExpression(text), JSON.stringify(text));
      }),
      { numRuns: 20000 },
    );
  });

  it('when words are read over and over (their memos keep a word from its second sight), then each reading is what working it out afresh gives', () => {
    // A fresh vocabulary, so that the memos start empty; words from a few letters, so that they
    // recur (second and later sights), share hash slots and fill a memo until it is emptied.
    const fresh = loadModerationPolicy(path.join(import.meta.dirname, '../../server/catalog/moderation.yaml')).vocabulary;
    const word = fc.oneof(
      fc.constantFrom(...known.slice(0, 200)),
      fc.stringMatching(/^[kilbomu]{1,9}$/),
      fc.stringMatching(/^[a-z]{7,20}$/),
      fc.constantFrom('murdr', 'kiiill', 'pipebomb', 'killyourself', 'bombb'),
    );
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 40 }), (words) => {
        for (const w of words) {
          const corrected = fresh.correct(w);
          assert.deepEqual(fresh.read(w, false), { word: corrected, stem: stemOf(corrected), possessive: false }, w);
          assert.equal(fresh.isWord(w), fresh.knows(w) || inDictionary(w), w);
          const split = fresh.segment(w);
          if (!fresh.knows(w)) assert.equal(fresh.splitInTwo(w), split !== undefined && split.length === 2 ? split[0]!.length : undefined, w);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
