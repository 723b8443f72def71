/**
 * Text normalisation for the embedded moderation policy, so that trivially
 * rewritten text is still caught: NFKC, case folding, diacritics stripped,
 * invisible characters dropped, simple leetspeak undone ("k1ll", "$hoot"),
 * letters spaced or dotted apart joined again ("k i l l", "k.i.l.l"), and
 * repeated letters collapsed ("kiiill"). Pure functions, no I/O.
 */

/** Leetspeak and look-alike symbols, applied only inside words (see deleet). */
const LEET = new Map<string, string>([
  ['0', 'o'], ['1', 'i'], ['3', 'e'], ['4', 'a'], ['5', 's'], ['7', 't'], ['8', 'b'], ['9', 'g'],
  ['@', 'a'], ['$', 's'], ['!', 'i'], ['|', 'l'], ['+', 't'], ['€', 'e'],
]);

/** Letters that lower-casing and NFD leave whole but a reader sees as plain Latin. */
const FOLD = new Map<string, string>([
  ['ß', 'ss'], ['æ', 'ae'], ['œ', 'oe'], ['ø', 'o'], ['đ', 'd'], ['ł', 'l'], ['ı', 'i'], ['þ', 'th'],
]);

const LETTER = /\p{L}/u;
const ALNUM = /[\p{L}\p{N}]/u;

/** NFKC, lower case, no diacritics, no invisible format characters (zero-width spaces, joiners). */
export function fold(text: string): string {
  const lower = text.normalize('NFKC').toLowerCase().replace(/\p{Cf}+/gu, '');
  const bare = lower.normalize('NFD').replace(/\p{M}+/gu, '').normalize('NFC');
  return Array.from(bare, (c) => FOLD.get(c) ?? c).join('');
}

/**
 * Undoes leetspeak in one whitespace-free chunk that holds a letter: digits
 * become letters anywhere in it, symbols only where a letter or digit follows
 * (so "k!ll" is "kill" but "kill!" keeps its exclamation mark). Chunks without
 * a letter ("2024", "16:9") are numbers and stay as they are.
 */
function deleet(chunk: string): string {
  if (!LETTER.test(chunk)) return chunk;
  const chars = Array.from(chunk);
  return chars
    .map((c, i) => {
      const mapped = LEET.get(c);
      if (mapped === undefined) return c;
      if (/\p{N}/u.test(c)) return mapped;
      return i + 1 < chars.length && ALNUM.test(chars[i + 1]!) ? mapped : c;
    })
    .join('');
}

/**
 * The words of a text after folding and leetspeak: runs of letters and digits.
 * Consecutive one-character words ("k i l l", "k.i.l.l", "g 0 r e") are
 * joined into one, leetspeak undone in the joined word.
 */
export function words(text: string): string[] {
  const raw = fold(text)
    .split(/\s+/u)
    .flatMap((chunk) => deleet(chunk).split(/[^\p{L}\p{N}]+/u))
    .filter(Boolean);
  const out: string[] = [];
  let run = '';
  for (const w of raw) {
    if (Array.from(w).length === 1) {
      run += w;
      continue;
    }
    if (run) out.push(deleet(run));
    run = '';
    out.push(w);
  }
  if (run) out.push(deleet(run));
  return out;
}

/** "kiiill" → "kil": repeated letters collapsed, so doubled and stretched spellings compare equal. */
export function squeeze(word: string): string {
  return word.replace(/(.)\1+/gu, '$1');
}

/** A text prepared for matching: its words joined without spaces, and where each word starts and ends. */
export interface Prepared {
  /** The words separated by single spaces (what category patterns are matched against). */
  spaced: string;
  /** The words joined without separators, repeated letters squeezed. */
  compact: string;
  starts: Set<number>;
  ends: Set<number>;
}

export function prepare(text: string): Prepared {
  const list = words(text);
  const starts = new Set<number>();
  const ends = new Set<number>();
  let compact = '';
  for (const w of list) {
    // Squeezed across words too ("mass shooting" is "mashoting"), as termKey does:
    // a word starting with the letter the previous one ended with shares it.
    const word = squeeze(w);
    const shared = compact.length > 0 && compact.at(-1) === word[0];
    starts.add(shared ? compact.length - 1 : compact.length);
    compact += shared ? word.slice(1) : word;
    ends.add(compact.length);
  }
  return { spaced: list.join(' '), compact, starts, ends };
}

/** A term in the form `contains` compares: its words joined and squeezed. Empty for a term with no letters or digits. */
export function termKey(term: string): string {
  return squeeze(words(term).join(''));
}

/**
 * Whether the text holds the term as whole words: the term's key occurs in the
 * compact text starting where a word starts and ending where a word ends. So
 * "kill yourself" matches "K I L L   Y O U R S E L F" and "kill-your-self" but
 * not "skill yourself".
 */
export function contains(text: Prepared, key: string): boolean {
  if (!key) return false;
  for (let at = text.compact.indexOf(key); at !== -1; at = text.compact.indexOf(key, at + 1)) {
    if (text.starts.has(at) && text.ends.has(at + key.length)) return true;
  }
  return false;
}
