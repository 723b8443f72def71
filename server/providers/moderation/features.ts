/**
 * What the learned classifier (classifier.ts) reads of a text: hashed features,
 * shared by the server and the training script (scripts/moderation/train.ts) so
 * that both read a text the same way.
 *
 * - the stems of the words as the policy's own normalisation reads them
 *   (normalize.ts: leetspeak, homoglyphs and spaced letters undone), alone and
 *   in pairs side by side;
 * - the character 3-, 4- and 5-grams of the text folded (normalize.ts: lower
 *   case, look-alike letters and invisible fillers undone) with its whitespace
 *   squeezed, which carry other languages, inflections and spellings the stems
 *   do not (folded rather than raw: leave-one-set-out recall was higher).
 *
 * Each feature is hashed into one of `2^bits` buckets (collisions are the price
 * of a model with no vocabulary to ship). A feature counts once however often it
 * occurs, and a text's features all weigh 1/√n (n distinct), so a long text is not
 * louder than a short one and a repeated run ("yyyy…", one gram many times) is not
 * louder than the run once: counted with repeats, one gram's weight grew with the
 * square root of its count, and a run of one letter read as certainly harmful.
 */
import { fold, tokenize, type Token, type Vocabulary } from './normalize.ts';

/**
 * The characters read of a text. A prompt's request sits in its first sentences; past this
 * the classifier stops reading (the rules read the whole text), so its cost per text is bounded.
 */
export const MAX_FEATURE_CHARS = 2_000;
/** The words read of a text: about as many as MAX_FEATURE_CHARS holds. */
export const MAX_FEATURE_WORDS = 400;

/** Seeds that keep the three kinds of feature apart in the hash space. */
const WORD = 0x9e3779b1;
const PAIR = 0x85ebca77;
const GRAM = 0xc2b2ae3d;

/** FNV-1a's step over one UTF-16 unit. */
export function step(h: number, c: number): number {
  return Math.imul(h ^ c, 0x01000193);
}

export function hashString(seed: number, s: string): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) h = step(h, s.charCodeAt(i));
  return h;
}

/** Murmur3's finaliser, then the low bits: FNV's low bits alone spread short strings poorly over the buckets. */
export function bucketOf(h: number, mask: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return ((h ^ (h >>> 16)) >>> 0) & mask;
}

/** Whether a UTF-16 unit is white space (what `\s` matches), without a regular expression per text. */
function isSpace(c: number): boolean {
  return (
    c === 32 ||
    (c >= 9 && c <= 13) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** The folded text's units, each run of white space one space, with one space before and after. */
function squeezedUnits(folded: string): Uint16Array {
  const units = new Uint16Array(folded.length + 2);
  let n = 0;
  units[n++] = 32;
  for (let i = 0; i < folded.length; i++) {
    const c = folded.charCodeAt(i);
    if (!isSpace(c)) units[n++] = c;
    else if (units[n - 1] !== 32) units[n++] = 32;
  }
  if (units[n - 1] !== 32) units[n++] = 32;
  return units.subarray(0, n);
}

/** A text's hashed features: distinct bucket indices, in ascending order, and the weight each carries. */
export interface Features {
  buckets: Uint32Array;
  /** 1/√(number of buckets): every feature's value. */
  value: number;
  /** The words read (at most MAX_FEATURE_WORDS): the classifier judges only texts of MIN_JUDGED_WORDS or more. */
  words: number;
}

/**
 * The fewest words the classifier judges. One or two words carry too little for a bag of
 * grams ("Race!" read as hate: the word is frequent in hateful training text); the rules
 * judge such texts alone, as they did before the classifier.
 */
export const MIN_JUDGED_WORDS = 3;

/**
 * The features of `text` in a space of `2^bits` buckets, given its tokens as the policy reads
 * them (the rules' own, so the text is not read twice): the first MAX_FEATURE_WORDS of them and
 * the grams of its first MAX_FEATURE_CHARS characters.
 */
export function featuresOf(text: string, tokens: readonly Token[], bits: number): Features {
  const head = text.length > MAX_FEATURE_CHARS ? text.slice(0, MAX_FEATURE_CHARS) : text;
  const words = Math.min(tokens.length, MAX_FEATURE_WORDS);
  const mask = (1 << bits) - 1;
  const units = squeezedUnits(fold(head));
  const out = new Uint32Array(words * 2 + Math.max(0, units.length - 2) * 3);
  let n = 0;
  let previous = 0;
  for (let i = 0; i < words; i++) {
    const stem = tokens[i]!.stem;
    const h = hashString(WORD, stem);
    out[n++] = bucketOf(h, mask);
    // A pair is the hash of the first word carried on into the second, past a separator.
    if (i > 0) out[n++] = bucketOf(hashString(step(previous ^ PAIR, 32), stem), mask);
    previous = h;
  }
  for (let i = 0; i + 3 <= units.length; i++) {
    let h = GRAM;
    for (let k = 0; k < 5 && i + k < units.length; k++) {
      h = step(h, units[i + k]!);
      if (k >= 2) out[n++] = bucketOf(h, mask);
    }
  }
  const sorted = out.subarray(0, n).sort();
  let distinct = 0;
  for (let i = 0; i < n; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[distinct++] = sorted[i]!;
  return { buckets: sorted.subarray(0, distinct), value: distinct === 0 ? 0 : 1 / Math.sqrt(distinct), words };
}

/** `featuresOf` a text read by itself (training, tests). */
export function textFeatures(text: string, vocabulary: Vocabulary, bits: number): Features {
  return featuresOf(text, tokenize(text.slice(0, MAX_FEATURE_CHARS), vocabulary), bits);
}
