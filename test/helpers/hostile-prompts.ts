/**
 * Prompts shaped to make text moderation work hard: short pieces joined by
 * punctuation (each join a candidate word), spelt-out letters, leetspeak,
 * look-alike and invisible Unicode, runs of letters to split, and the policy's
 * own trigger words repeated without ever completing a harmful request. Each
 * shape fills a text of a given length from a seed, so that a benchmark's rounds
 * and a property test's runs see different text of the same shape (a cache of a
 * previous round's words does not make the round cheap).
 */
import { rng } from '../../server/providers/random.ts';

/** The local generators' seeded PRNG: the same seed, the same text. */
export const seeded = rng;

const LETTERS = [...'etaoinshrdlucmfwypvbgkjqxz'];
/** Beginnings of policy words: pieces that keep a merge of joined pieces looking like a word for longest. */
const STARTS = ['kil', 'mur', 'bom', 'poi', 'sho', 'sta', 'gun', 'wea', 'exp', 'coc', 'her', 'nud', 'kid', 'chi', 'ter', 'ris'];
const TRIGGERS = ['kill', 'bomb', 'shoot', 'poison', 'people', 'children', 'weapon', 'how', 'to', 'make', 'with', 'of', 'my', 'the'];
const JOINERS = ['-', '.', '_', '/', '—', ',', '~', '*'];

type Random = () => number;
const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
const word = (random: Random, length: number) => Array.from({ length }, () => pick(random, LETTERS)).join('');

/** Each shape: the next few characters of a text, drawn from `random`. */
export const PROMPT_SHAPES = {
  /** "xq-vo-kd-…": two-letter pieces joined by punctuation, one chunk. */
  punctuatedPairs: (random: Random) => word(random, 2) + pick(random, JOINERS),
  /** "kil-mur-bom-…": word beginnings joined, each join looks like the start of a word. */
  punctuatedStarts: (random: Random) => pick(random, STARTS) + pick(random, JOINERS),
  /** "k i l l m u …": spelt-out letters. */
  spelledOut: (random: Random) => `${pick(random, LETTERS)} `,
  /** "k.i.l.l.…": letters dotted apart in one chunk. */
  dottedLetters: (random: Random) => `${pick(random, LETTERS)}.`,
  /** "k1ll 3v3ry0n3 …": digits and symbols for letters. */
  leetspeak: (random: Random) =>
    `${Array.from(pick(random, TRIGGERS), (c) => ({ i: '1', e: '3', o: '0', a: '@', s: '$', l: '|' })[c] ?? c).join('')}${pick(random, ['', '!', '$'])} `,
  /** Full-width letters with zero-width spaces and dashes between them. */
  unicode: (random: Random) => `${String.fromCodePoint(0xff41 + Math.floor(random() * 26))}\u200b${random() < 0.3 ? '—' : ''}`,
  /** Runs of 7–80 letters that are no word: each one tried as words run together. */
  letterRuns: (random: Random) => `${word(random, 7 + Math.floor(random() * 74))} `,
  /** Trigger words in an order that never makes a request ("kill of people of …"). */
  triggerSoup: (random: Random) => `${pick(random, TRIGGERS)} ${pick(random, ['of', 'with', 'the', 'to'])} `,
  /** Ordinary prose with spaces: the everyday case. */
  prose: (random: Random) => `${pick(random, ['a', 'the', 'bright', 'harbour', 'at', 'dawn', 'with', 'gulls', 'over', 'calm', 'water'])} `,
} satisfies Record<string, (random: Random) => string>;

export type PromptShape = keyof typeof PROMPT_SHAPES;

/** A prompt of exactly `length` UTF-16 units (or one less, not to split a pair) in `shape`, from `seed`. */
export function hostilePrompt(shape: PromptShape, length: number, seed: number): string {
  const random = seeded(seed);
  let text = '';
  while (text.length < length) text += PROMPT_SHAPES[shape](random);
  text = text.slice(0, length);
  return /[\ud800-\udbff]$/.test(text) ? text.slice(0, -1) : text;
}
