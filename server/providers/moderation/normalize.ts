/**
 * Text normalisation for the embedded moderation policy, so that trivially
 * rewritten text reads as what it says: NFKC, case folding, diacritics
 * stripped, invisible characters dropped, look-alike letters of other scripts
 * folded to Latin (the confusables table of the `obscenity` package),
 * leetspeak undone ("k1ll", "ki11", "$hoot", "|<ill"), letters spaced or
 * dotted apart joined again and split into the words the policy knows
 * ("a p i p e" → "a pipe"), stretched letters squeezed ("kiiill"), and a
 * misspelt word that no English dictionary holds read as the policy word one
 * edit away ("murdr" → "murder"). Words are compared by their Porter stems.
 * Pure functions over a Vocabulary built once from the policy; no I/O but the
 * dictionary (dictionary.ts), read once.
 */
import { resolveConfusablesTransformer } from 'obscenity';
import { stemmer } from 'stemmer';
import { inDictionary, readDictionary } from './dictionary.ts';
import { BUILT_TRIES_DIR, builtTriesName, LetterTrie, readBuiltTries, writeBuiltTries } from './letter-trie.ts';
import { INVISIBLE_LETTERS, LOOK_ALIKES } from './look-alikes.ts';
import { properNames } from './names.ts';

export { inDictionary };

/** Letters that lower-casing and NFD leave whole but a reader sees as plain Latin (before the confusables table, which reads ß as B). */
const FOLD = new Map<string, string>([
  ['ß', 'ss'],
  ['æ', 'ae'],
  ['œ', 'oe'],
  ['ø', 'o'],
  ['đ', 'd'],
  ['ł', 'l'],
  ['ı', 'i'],
  ['þ', 'th'],
  ['’', "'"],
  ['‘', "'"],
  ['ʼ', "'"],
  ['`', "'"],
]);

const confusables = resolveConfusablesTransformer();

/** Leetspeak: each character's readings, the likelier first; the vocabulary picks among them. */
const LEET = new Map<string, string[]>([
  ['0', ['o']],
  ['1', ['i', 'l']],
  ['3', ['e']],
  ['4', ['a']],
  ['5', ['s']],
  ['6', ['g', 'b']],
  ['7', ['t']],
  ['8', ['b']],
  ['9', ['g']],
  ['@', ['a']],
  ['$', ['s']],
  ['!', ['i', 'l']],
  ['|', ['l', 'i']],
  ['+', ['t']],
  ['€', ['e']],
]);

/** A character of LEET (each a single UTF-16 unit). */
const LEET_CHARACTER = new RegExp(`[${[...LEET.keys()].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}]`);

const LETTER = /\p{L}/u;
const ALNUM = /[\p{L}\p{N}]/u;
const DIGIT = /\p{N}/u;

/** Contractions written with 's that are not possessives. */
const CONTRACTED = new Set(['let', 'it', 'he', 'she', 'that', 'what', 'there', 'who', 'where', 'how', 'here', 'everyone', 'one']);

/** Short words every segmentation may use, besides the policy's own. */
const COMMON = `a i an the to too how do does did can could would should will shall may might must be is are was were am been being
  my me mine you your yours he him his she her hers it its we us our they them their this that these those
  of in on at for from with without by about into onto over under after before up down out off and or but so if then than
  what where when why who whom which whose there here not no yes all any some every each one two
  make made get got want need like just now please give show tell write help use using step steps way ways best
  kill set go going gonna wanna let lets im id ill ive dont cant wont`;

/** The most letters an inflection adds to a word that still stems as the word does. */
const MAX_INFLECTION = 12;

/**
 * The letters a merged span may run past the known prefixes it follows: "-ings", "-ness";
 * rarer long inflections of a word split by punctuation ("assault-iveness") are not merged.
 */
const MERGE_INFLECTION = 6;

/** A word's Porter stem; words of three letters or fewer are their own stem ("ied" is not "i"). */
export function stemOf(word: string): string {
  if (word.length <= 3) return word;
  // Every rule of Porter's (and the -ize rule below) rewrites an ending that closes with one of
  // "sdgylirnmectu": a word ending in another letter is its own stem, lower-cased, without the
  // stemmer or the cache (half of the ever-new words of hostile text).
  const last = word.charCodeAt(word.length - 1) - 97;
  if (last >= 0 && last < 26 && OWN_STEM_ENDINGS[last] === 1) return word.toLowerCase();
  let stem = stems.get(word);
  if (stem === undefined) {
    stem = porterStem(word);
    stems.offer(word, stem);
  }
  return stem;
}

/**
 * Steps of reading and matching a text (words looked up, occurrences visited), counted so
 * that tests can show the work grows linearly with the text's length without timing it.
 */
export const work = { steps: 0 };

/**
 * The longest word or chunk the memos below keep (a word of the policy is at most a few dozen
 * letters): 20,000 remembered 30,000-character chunks, their pieces with them, would be gigabytes.
 */
const MAX_REMEMBERED_CHARS = 64;

/** The slots of a Memo's tables of hashes (a power of two). */
const SEEN_SLOTS = 1 << 15;

/**
 * A bounded memo of a pure function of a word or chunk: what texts repeat is worked out once.
 * A key is kept from its second sight on, its first only noted as a hash in a table of numbers
 * (a slot per hash, overwritten): hostile text brings thousands of never-seen words per text,
 * and keeping each one made the garbage collector copy and promote them all, a quarter of the
 * CPU of a 30,000-character text of random letters, for words never asked again. A bit per
 * hash marks what is kept, so that most never-seen keys are answered without the map (hashing
 * a new string into a map of thousands costs more than the walk of its letters). Emptied when
 * full: a text of ever-new keys empties it rather than growing it. Keys longer than
 * MAX_REMEMBERED_CHARS are never kept.
 */
class Memo<V> {
  private readonly kept = new Map<string, V>();
  /** The hash of the last key noted in each slot. */
  private readonly seen = new Int32Array(SEEN_SLOTS);
  /** A bit per slot: some kept key has its hash there (set when kept, cleared with the map). */
  private readonly keptSlots = new Uint8Array(SEEN_SLOTS);
  /** The last key hashed and its hash, for the `offer` that follows a miss. */
  private lastKey = '';
  private lastHash = 0;

  /** `limit`: the most keys kept before the memo is emptied. */
  constructor(private readonly limit = 50_000) {}

  /** A hash of the key's length and of its first and last six code units at most (a hit pays the map's own hash besides). */
  private hash(key: string): number {
    if (key === this.lastKey) return this.lastHash;
    const n = key.length;
    let hash = Math.imul(0x811c9dc5 ^ n, 0x01000193);
    for (let k = 0; k < n; k = k === 5 && n > 12 ? n - 6 : k + 1) hash = Math.imul(hash ^ key.charCodeAt(k), 0x01000193);
    this.lastKey = key;
    return (this.lastHash = hash);
  }

  get(key: string): V | undefined {
    if (key.length > MAX_REMEMBERED_CHARS || this.keptSlots[this.hash(key) & (SEEN_SLOTS - 1)] === 0) return undefined;
    return this.kept.get(key);
  }

  /** Keeps `value` for `key` if the key was offered before (and is short enough); else notes it. */
  offer(key: string, value: V): void {
    if (key.length > MAX_REMEMBERED_CHARS) return;
    const hash = this.hash(key);
    const slot = hash & (SEEN_SLOTS - 1);
    if (this.seen[slot] !== hash) {
      this.seen[slot] = hash;
      return;
    }
    if (this.kept.size >= this.limit) {
      this.kept.clear();
      this.keptSlots.fill(0);
    }
    this.kept.set(key, value);
    this.keptSlots[slot] = 1;
  }
}

/** Stems already worked out (50,000 at most): prompts and the merge of split words ask for the same ones again. */
const stems = new Memo<string>();

/** By letter (a = 0): 1 for the last letters no suffix rule of porterStem ends with (a b f h j k o p q v w x z). */
const OWN_STEM_ENDINGS = Uint8Array.from('abcdefghijklmnopqrstuvwxyz', (c) => ('abfhjkopqvwxz'.includes(c) ? 1 : 0));

/** The stem without stemOf's shortcut or cache (exported for the test that holds the shortcut to it). */
export function porterStem(word: string): string {
  // Porter reads "weaponize" as "weapon": keep the verb apart (and -ise as -ize).
  // (Only a word holding "is" or "iz" can match: most are not run through the expression.)
  const verb = word.includes('is') || word.includes('iz') ? /^(.{3,}?)i[sz](?:e|ed|es|ing|ation|ations|er|ers)$/u.exec(word) : null;
  if (verb) return `${verb[1]}iz`;
  const stem = stemmer(word);
  return stem.length < 3 ? word : stem; // "ieds" stays "ieds", not "i"
}

const LETTERS_ONLY = /^\p{L}+$/u;

/** Whether a word holds a letter (`/\p{L}/u`): an ASCII letter by its code, anything else asked of the expression. */
function hasLetter(word: string): boolean {
  for (let k = 0; k < word.length; k++) {
    const c = word.charCodeAt(k);
    if (c >= 0x80) return LETTER.test(word);
    if ((c | 0x20) >= 97 && (c | 0x20) <= 122) return true;
  }
  return false;
}

/** Whether a word is all letters (`/^\p{L}+$/u`): ASCII letters by their codes, anything else asked of the expression. */
function lettersOnly(word: string): boolean {
  for (let k = 0; k < word.length; k++) {
    const c = word.charCodeAt(k) | 0x20;
    if (c < 97 || c > 122) return LETTERS_ONLY.test(word);
  }
  return word.length > 0;
}

/** Printable ASCII and whitespace only. */
const ASCII = /^[\t\n\r\x20-\x7e]*$/;

/** No character past ASCII. */
const ASCII_ONLY = /^[\x00-\x7f]*$/;

/** What each non-ASCII character (and the backtick) folds to, remembered: a text repeats its few odd characters. */
const folded = new Map<string, string>();

export function foldChar(c: string): string {
  let out = folded.get(c);
  if (out === undefined) {
    out = FOLD.get(c) ?? LOOK_ALIKES.get(c);
    if (out === undefined) {
      const confused = confusables.transform(c.codePointAt(0)!);
      out = typeof confused === 'number' ? String.fromCodePoint(confused).toLowerCase() : c;
    }
    // Bounded: a text of ever-new characters empties it rather than growing it.
    if (folded.size >= 10_000) folded.clear();
    folded.set(c, out);
  }
  return out;
}

/**
 * A class of code points (what a one-code-point `u` expression matches), each BMP one asked of
 * the expression once and kept in a table: a walk of a long text by code point then costs a read
 * per character, where the expression's global replace paid per match (a zero-width space after
 * every letter made 13,000 matches in a text). ASCII is never in the classes below but ALNUM's.
 */
class CodePoints {
  private readonly bmp = new Uint8Array(0x10000);
  constructor(private readonly pattern: RegExp) {}

  has(code: number): boolean {
    if (code > 0xffff) return this.pattern.test(String.fromCodePoint(code));
    let known = this.bmp[code]!;
    if (known === 0) this.bmp[code] = known = this.pattern.test(String.fromCharCode(code)) ? 1 : 2;
    return known === 1;
  }
}

/** Invisible format characters (`\p{Cf}`) and the fillers of INVISIBLE_LETTERS: what fold drops. */
const DROPPED = new CodePoints(new RegExp(`\\p{Cf}|${INVISIBLE_LETTERS.source.replace(/\+$/, '')}`, 'u'));
/** Combining marks (`\p{M}`), dropped once a text is decomposed. */
const MARKS = new CodePoints(/\p{M}/u);
/** Format characters (`\p{Cf}`) alone, and letters (`\p{L}`): what the language check drops and reads. */
const FORMAT = new CodePoints(/\p{Cf}/u);
const LETTERS = new CodePoints(LETTER);

/** The text without format characters (`text.replace(/\p{Cf}+/gu, '')`), by code point. */
export function withoutFormat(text: string): string {
  return withoutCodePoints(text, FORMAT);
}

/** Whether a code point is a letter (`\p{L}`), each BMP one asked of the expression once. */
export function isLetter(code: number): boolean {
  return LETTERS.has(code);
}

/**
 * The text without the code points of `dropped` (`text.replace(/[class]+/gu, '')`), walked by code
 * point as the expression walks it; for a class that holds no ASCII character (ASCII is skipped).
 */
export function withoutCodePoints(text: string, dropped: { has(code: number): boolean }): string {
  // What is kept is copied into an array of code units and made a string once: appending each
  // kept run made a rope of thousands of pieces when every other character is dropped.
  let kept: Uint16Array | undefined;
  let length = 0;
  for (let at = 0; at < text.length;) {
    const unit = text.charCodeAt(at);
    if (unit < 0x80) {
      if (kept !== undefined) kept[length++] = unit;
      at++;
      continue;
    }
    const code = text.codePointAt(at)!;
    const next = at + (code > 0xffff ? 2 : 1);
    if (dropped.has(code)) {
      if (kept === undefined) {
        kept = new Uint16Array(text.length);
        for (let k = 0; k < at; k++) kept[k] = text.charCodeAt(k);
        length = at;
      }
    } else if (kept !== undefined) {
      for (let k = at; k < next; k++) kept[length++] = text.charCodeAt(k);
    }
    at = next;
  }
  return kept === undefined ? text : unitsToString(kept, length);
}

/** The first `length` code units of `units` as a string (as they are: a lone surrogate stays one). */
function unitsToString(units: Uint16Array, length: number): string {
  return Buffer.from(units.buffer, units.byteOffset, length * 2).toString('utf16le');
}

/** foldChar of each BMP character by its code, null when it is the character itself: no string is made to find that out. */
const foldedUnits = new Map<number, string | null>();

/** Each character past ASCII, and the backtick, folded (`text.replace(/[^\x00-\x5f\x61-\x7f]/gu, foldChar)`), by code point. */
export function foldEach(text: string): string {
  let out = '';
  let copied = 0;
  for (let at = 0; at < text.length;) {
    const unit = text.charCodeAt(at);
    if (unit < 0x80 && unit !== 0x60) {
      at++;
      continue;
    }
    const next = at + (unit >= 0xd800 && unit <= 0xdbff && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00 ? 2 : 1);
    let f: string | null | undefined;
    if (next === at + 1) {
      f = foldedUnits.get(unit);
      if (f === undefined) {
        const c = String.fromCharCode(unit);
        const g = foldChar(c);
        foldedUnits.set(unit, (f = g === c ? null : g));
      }
    } else {
      const c = text.slice(at, next);
      f = foldChar(c);
      if (f === c) f = null;
    }
    if (f !== null) {
      out += text.slice(copied, at) + f;
      copied = next;
    }
    at = next;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** NFKC, lower case, no diacritics, no invisible format characters or fillers, look-alike letters folded to Latin. */
export function fold(text: string): string {
  // A submission's text is folded by the tokenizer, the gloss and the classifier's features in
  // turn: the last one is remembered.
  if (text === lastFold.text) return lastFold.folded;
  lastFold.folded = foldOnce(text);
  lastFold.text = text;
  return lastFold.folded;
}

/** A text and its fold. */
class FoldedText {
  text = '';
  folded = '';
}

/** The last text folded and its fold (a memo of one entry). */
const lastFold = new FoldedText();

function foldOnce(text: string): string {
  // Plain ASCII (most prompts) has nothing to normalise, strip or fold but its case and backticks.
  if (ASCII.test(text)) return text.toLowerCase().replace(/`/g, "'");
  // Only characters past ASCII can be dropped, and only they (and the backtick) fold to something
  // else: the walks below skip ASCII at a comparison a character.
  const out = foldEach(withoutCodePoints(text.normalize('NFKC').toLowerCase(), DROPPED));
  // ASCII has no marks to strip: the decomposition and recomposition would give it back unchanged.
  return ASCII_ONLY.test(out) ? out : withoutCodePoints(out.normalize('NFD'), MARKS).normalize('NFC');
}

/** "kiiill" → "kil": repeated letters collapsed, so doubled and stretched spellings compare equal. */
export function squeeze(word: string): string {
  // Most words repeat no letter: they are their own squeeze, without a regular expression or a
  // copy (a surrogate pair leaves it to the expression, which compares whole characters).
  let at = 1;
  for (let c = word.charCodeAt(0); at < word.length; at++) {
    const next = word.charCodeAt(at);
    if (next === c || (next & 0xf800) === 0xd800) break;
    c = next;
  }
  return at >= word.length ? word : word.replace(/(.)\1+/gu, '$1');
}

/**
 * How `a` becomes `b` in one edit, ranked by how likely a typo it is: 1 two
 * letters swapped, 2 a letter left out or added, 3 a letter replaced;
 * undefined when more than one edit apart (or equal).
 */
function oneEdit(a: string, b: string): number | undefined {
  if (Math.abs(a.length - b.length) > 1 || a === b) return undefined;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  if (a.length === b.length) {
    if (a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2)) return 1;
    return a.slice(i + 1) === b.slice(i + 1) ? 3 : undefined;
  }
  const rest = a.length > b.length ? a.slice(i + 1) === b.slice(i) : a.slice(i) === b.slice(i + 1);
  return rest ? 2 : undefined;
}

/** The runs of letters and digits of a text. */
function pieces(text: string): string[] {
  return text.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
}

/** The words a policy knows: what segmentation, leetspeak and spelling correction aim at. */
export class Vocabulary {
  private readonly words = new Set<string>();
  private readonly stems = new Set<string>();
  /** Which pairs of lower-case letters begin a stem of `stems`, by (first − a) × 26 + (second − a). */
  private readonly stemStarts = new Uint8Array(26 * 26);
  private readonly squeezed = new Map<string, string>();
  /** Policy words of 5+ letters by each one-letter deletion of them (and themselves), for spelling correction. */
  private readonly deletions = new Map<string, string[]>();
  /** The keys of `deletions` as a trie of letters, and their reversals: which deletions of a word can be keys. */
  private readonly deletionStarts: LetterTrie;
  private readonly deletionEnds: LetterTrie;
  /** The name of the build's copy of the tries for these words and this code (letter-trie.ts). */
  readonly triesName: string;
  /** Whether the tries were read from the build's copy rather than built. */
  readonly triesFromBuild: boolean;

  /** `builtTries`: where the build's copy of the tries is looked for (letter-trie.ts). */
  constructor(policyWords: Iterable<string>, builtTries = BUILT_TRIES_DIR) {
    const common = COMMON.split(/\s+/).filter(Boolean);
    const policy = [...policyWords];
    // The tries the build made from these very words by this code are read, not built again (most of building a vocabulary).
    this.triesName = builtTriesName([...common, ...policy], [import.meta.filename]);
    const built = readBuiltTries(builtTries, this.triesName, 3);
    this.triesFromBuild = built !== undefined;
    [this.prefixes, this.deletionStarts, this.deletionEnds] = built ?? [new LetterTrie(), new LetterTrie(), new LetterTrie()];
    for (const w of common) this.add(w, false, built === undefined);
    for (const w of policy) this.add(w, true, built === undefined);
    if (built === undefined) for (const trie of this.tries()) trie.pack();
    // Read the dictionary now, at start, not inside the first request (dictionary.ts: the build keeps it ready to read).
    readDictionary();
  }

  /** The tries: the prefixes, the deletions from the start and from the end (the build writes them; tests compare them). */
  tries(): LetterTrie[] {
    return [this.prefixes, this.deletionStarts, this.deletionEnds];
  }

  /** For the build: writes this vocabulary's tries where a vocabulary of the same words looks for them. */
  writeTries(dir = BUILT_TRIES_DIR): void {
    writeBuiltTries(dir, this.triesName, this.tries());
  }

  /**
   * The longest text `knows` can accept: the longest word, plus the longest ending the
   * stemmer strips from an inflection of it ("-ationally"). Longer text is never one word.
   */
  longest = 0;

  /** The prefixes of every word and stem, as a trie of letters. */
  private readonly prefixes: LetterTrie;

  /**
   * How long a merged span starting with `text` can be and still be worth asking `knows`:
   * the letters that follow a path of known prefixes, plus an everyday inflection; at most
   * three letters when not even the first three follow one (a stem keeps a word's first three).
   */
  mergeReach(text: string, from = 0): number {
    let node = 0;
    let depth = 0;
    for (let at = from; at < text.length; at++) {
      node = this.prefixes.child(node, text.charCodeAt(at));
      if (node < 0) break;
      depth++;
    }
    return depth < 3 ? 3 : depth + MERGE_INFLECTION;
  }

  /**
   * Where the longest merge of `parts` from `i` worth asking `knows` ends (exclusive): a known
   * word's letters follow a path of the vocabulary's prefixes to within an inflection of its
   * end (`mergeReach`), it is at most `longest` letters and MAX_MERGED_PIECES pieces. The path
   * is walked once as pieces are added, so a start costs the letters of one word at most.
   */
  mergeEnd(parts: readonly string[], i: number): number {
    let node = 0;
    let depth = 0;
    let length = 0;
    let j = i;
    while (j < parts.length && j - i < MAX_MERGED_PIECES) {
      const part = parts[j]!;
      const next = length + part.length;
      if (j > i && next > this.longest) break;
      for (let k = 0; node >= 0 && k < part.length; k++) {
        node = this.prefixes.child(node, part.charCodeAt(k));
        if (node >= 0) depth++;
      }
      // Off the path, the reach is fixed: a piece that passes it is not part of the merge.
      if (node < 0 && j > i && next > (depth < 3 ? 3 : depth + MERGE_INFLECTION)) break;
      length = next;
      j++;
    }
    return j;
  }

  /** `tries`: whether the word goes into the tries too (not when they were read from the build). */
  private add(word: string, correctable: boolean, tries: boolean): void {
    if (this.words.has(word)) return;
    this.words.add(word);
    this.longest = Math.max(this.longest, word.length + MAX_INFLECTION);
    if (tries) this.prefixes.add(word);
    if (word.length >= 4) {
      const stem = stemOf(word);
      this.stems.add(stem);
      const first = stem.charCodeAt(0);
      const second = stem.charCodeAt(1);
      if (first >= 97 && first <= 122 && second >= 97 && second <= 122) this.stemStarts[(first - 97) * 26 + second - 97] = 1;
      if (tries) this.prefixes.add(stem);
    }
    const key = squeeze(word);
    if (!this.squeezed.has(key)) this.squeezed.set(key, word);
    if (correctable && word.length >= 4 && /^\p{L}+$/u.test(word)) {
      for (const d of [word, ...Array.from(word, (_, i) => word.slice(0, i) + word.slice(i + 1))]) {
        const list = this.deletions.get(d) ?? [];
        list.push(word);
        this.deletions.set(d, list);
        if (!tries) continue;
        // By UTF-16 unit, as `correct` walks them.
        this.deletionStarts.add(d.split(''));
        this.deletionEnds.add(d.split('').reverse());
      }
    }
  }

  private readonly cache = new Memo<Token>(20_000);
  private readonly chunks = new Memo<readonly Piece[]>(20_000);

  /** How `read` splits a chunk, remembered (bounded) since texts repeat their chunks. */
  remembered(chunk: string, read: (chunk: string, vocabulary: Vocabulary) => readonly Piece[]): readonly Piece[] {
    let pieces = this.chunks.get(chunk);
    if (pieces === undefined) {
      pieces = read(chunk, this);
      this.chunks.offer(chunk, pieces);
    }
    return pieces;
  }

  /** A word as the policy reads it (corrected, stemmed); remembered, since prompts repeat their words. */
  read(word: string, possessive: boolean): Token {
    let token = this.cache.get(word);
    if (token === undefined) {
      const corrected = this.correct(word);
      token = { word: corrected, stem: stemOf(corrected), possessive: false };
      this.cache.offer(word, token);
    }
    return possessive ? { ...token, possessive } : token;
  }

  private readonly english = new Memo<boolean>(20_000);
  /** The word isWord was last asked and its answer: `correct` asks again of the word `tokenize` just asked. */
  private lastAsked = '';
  private lastAnswer = false;

  /** Whether a word reads as English: the policy's or everyday words, or the dictionary's; remembered (bounded). */
  isWord(word: string): boolean {
    let known = this.english.get(word);
    if (known === undefined) {
      known = this.knows(word) || inDictionary(word);
      this.english.offer(word, known);
    }
    this.lastAsked = word;
    this.lastAnswer = known;
    return known;
  }

  /** A word the policy or everyday English (COMMON) holds, or an inflection of a policy word ("killing"). */
  knows(word: string): boolean {
    work.steps += word.length;
    if (this.words.has(word)) return true;
    if (word.length < 4) return false;
    // A stem keeps its word's first two letters (Porter rewrites endings; true of every word of
    // the dictionary): a lower-case word whose first two begin no stem of the policy's has none
    // of them, without stemming it (most unknown words of hostile text).
    const first = word.charCodeAt(0);
    const second = word.charCodeAt(1);
    if (first >= 97 && first <= 122 && second >= 97 && second <= 122 && this.stemStarts[(first - 97) * 26 + second - 97] === 0) return false;
    return this.stems.has(stemOf(word));
  }

  /** The word a token stands for: itself when known or a dictionary word; else squeezed or corrected to a policy word. */
  correct(word: string): string {
    // Whether a long word is English is known already (asked before it is read, to split it).
    const english = word.length < 7 ? undefined : word === this.lastAsked ? this.lastAnswer : this.english.get(word);
    if (english === true) return word;
    if ((english === undefined && this.knows(word)) || !hasLetter(word)) return word;
    if (english === undefined && inDictionary(word)) return word;
    const squeezed = this.squeezed.get(squeeze(word));
    if (squeezed !== undefined) return squeezed;
    // Longer than any policy word and an edit: nothing to correct it to (and the one-letter
    // deletions of a 15,000-letter run would be 15,000 copies of it).
    if (word.length < 3 || word.length > this.longest || !lettersOnly(word)) return word;
    // The likeliest typo wins; a tie between two policy words corrects nothing.
    // The word itself, then (five letters or more) each one-letter deletion of it: the keys of `deletions`.
    const deletable = word.length < 5 ? 0 : word.length;
    work.steps += word.length * (deletable + 1);
    // A deletion at k is a key only if the letters before k begin a key and those after k end
    // one: most words (and every random run of letters) leave no k to try, and no copy to make.
    // The word itself is a key only if all its letters follow the trie (most words are not one,
    // and the walk is cheaper than asking the map). A word of four letters or fewer has no
    // deletion to try: the walk from its end is not made for it.
    let lead = 0;
    const starts = this.deletionStarts;
    for (let node = starts.child(0, word.charCodeAt(0)); node >= 0 && lead < word.length; node = starts.child(node, word.charCodeAt(lead))) lead++;
    let from = 0;
    let to = -1;
    if (deletable > 0) {
      let tail = 0;
      const ends = this.deletionEnds;
      for (
        let node = ends.child(0, word.charCodeAt(word.length - 1));
        node >= 0 && tail < word.length;
        node = ends.child(node, word.charCodeAt(word.length - 1 - tail))
      )
        tail++;
      from = Math.max(0, word.length - 1 - tail);
      to = Math.min(deletable - 1, lead);
    }
    // Made only when a candidate is found (most words have none).
    let ranked: Map<string, number> | undefined;
    for (let k = -1; k <= to; k = k < 0 ? from : k + 1) {
      if (k < 0 && lead < word.length) continue;
      const candidates = this.deletions.get(k < 0 ? word : word.slice(0, k) + word.slice(k + 1));
      if (candidates === undefined) continue;
      for (const c of candidates) {
        const rank = oneEdit(word, c);
        // Short words: only a letter left out ("bom" for "bomb").
        if (rank !== undefined && (word.length >= 5 || c.length === word.length + 1)) (ranked ??= new Map()).set(c, rank);
      }
    }
    if (ranked === undefined) return word;
    const best = Math.min(...ranked.values());
    const winners = [...ranked].filter(([, rank]) => rank === best);
    return winners.length === 1 ? winners[0]![0] : word;
  }

  /**
   * Splits letters run together ("apipe", "killyourself") into known words,
   * fewest words first; undefined when no split into known words exists.
   */
  segment(run: string): string[] | undefined {
    const n = run.length;
    if (n > 80) return undefined;
    // count[end]: fewest words covering run[0, end); from[end]: where the last of them starts.
    // A word is at most `longest` letters, so each end tries a bounded number of starts.
    // A word starting at `start` is at most `mergeReach` letters, so each start tries a
    // bounded number of ends; going forward, the first (leftmost) split of a count wins.
    const count = new Int32Array(n + 1).fill(-1);
    const from = new Int32Array(n + 1);
    count[0] = 0;
    for (let start = 0; start < n; start++) {
      if (count[start]! < 0) continue;
      const last = Math.min(n, start + this.mergeReach(run, start));
      for (let end = start + 1; end <= last; end++) {
        if (count[end]! >= 0 && count[start]! + 1 >= count[end]!) continue;
        if (!this.knows(run.slice(start, end))) continue;
        count[end] = count[start]! + 1;
        from[end] = start;
      }
    }
    if (count[n]! < 0) return undefined;
    const split: string[] = [];
    for (let end = n; end > 0; end = from[end]!) split.unshift(run.slice(from[end]!, end));
    return split;
  }

  /**
   * What `segment` gives for a run that is no known word, when that is two words: where the
   * first ends; undefined when it gives no split or more words. Without the table of every
   * split: the fewest-words split is two words exactly when some prefix within reach of the
   * start is a known word and the rest, within reach of it, is one too, and `segment`'s is the
   * one with the shortest first word.
   */
  splitInTwo(run: string): number | undefined {
    const n = run.length;
    if (n > 80) return undefined;
    let at = this.splits.get(run);
    if (at === undefined) {
      at = this.findSplitInTwo(run) ?? -1;
      this.splits.offer(run, at);
    }
    return at < 0 ? undefined : at;
  }

  /** Where `splitInTwo` splits a run, remembered (bounded): names and compounds recur. */
  private readonly splits = new Memo<number>(20_000);

  private findSplitInTwo(run: string): number | undefined {
    const n = run.length;
    const last = Math.min(n - 1, this.mergeReach(run, 0));
    for (let at = 1; at <= last; at++) {
      if (n > at + this.mergeReach(run, at)) continue;
      if (this.knows(run.slice(0, at)) && this.knows(run.slice(at))) return at;
    }
    return undefined;
  }

  /** Leetspeak undone in a chunk holding a letter: the reading whose words are all known, else the likeliest one. */
  deleet(chunk: string): string {
    if (!LETTER.test(chunk) || !LEET_CHARACTER.test(chunk)) return chunk;
    if (NUMBER_WITH_UNIT.test(chunk)) return chunk; // "1950s", "90s", "5k", "4th": a number, not a word
    const chars = Array.from(chunk);
    const options = chars.map((c, i) => {
      const readings = LEET.get(c);
      if (readings === undefined) return [c];
      if (DIGIT.test(c)) return readings;
      // Symbols read as letters only where a letter or digit follows ("k!ll", not "kill!").
      return i + 1 < chars.length && ALNUM.test(chars[i + 1]!) ? readings : [c];
    });
    if (pieces(chunk).every((p) => this.knows(p) && LETTER.test(p))) return chunk;
    // A chunk longer than a few words is not one leetspeak word: its likeliest reading, without
    // trying 64 readings of the whole chunk (which made a long punctuated chunk cost 64 passes).
    if (chars.length > 4 * this.longest) return options.map((o) => o[0]!).join('');
    const ambiguous = options
      .map((o, i) => (o.length > 1 ? i : -1))
      .filter((i) => i >= 0)
      .slice(0, 6);
    const likeliest = options.map((o) => o[0]!);
    for (let mask = 0; mask < 1 << ambiguous.length; mask++) {
      const reading = likeliest.slice();
      ambiguous.forEach((at, bit) => {
        if (mask & (1 << bit)) reading[at] = options[at]![1]!;
      });
      const text = reading.join('');
      if (pieces(text).every((p) => this.knows(p))) return text;
    }
    return likeliest.join('');
  }
}

/** One word of a text as the policy reads it. */
export interface Token {
  word: string;
  stem: string;
  /** Written as a possessive ("kid's", "kids'"): a modifier, not what a verb acts on. */
  possessive: boolean;
}

/** A match of an age (`n`) read as `minorage` when under 18. */
function young(all: string, n: string): string {
  return Number(n) < 18 ? ' minorage ' : all;
}

/** Ages under 18 written as numbers ("12 year old", "13yo", "a 9-year-old") become one word, `minorage`. */
function markMinorAges(text: string): string {
  if (!/\d/.test(text)) return text; // both readings need a digit
  return text
    .replace(
      /\b(?:i am|im|i'm|you are|youre|you're|she is|shes|she's|he is|hes|he's|aged?|turned)\s+(\d{1,2})\b(?!\s*(?:%|am|pm|th|st|nd|rd|minutes?|hours?|days?|weeks?|months?|years|kg|lbs?|cm|inch))/gu,
      young,
    )
    .replace(/\b(\d{1,2})\s*-?\s*(?:y[o0]|y\/[o0]|yrs?|years?)\b(?:\s*-?\s*old)?/gu, young);
}

/** The most pieces joined into one word ("k-i-l-l-y-o-u-r-s-e-l-f" is twelve). */
const MAX_MERGED_PIECES = 16;

export interface Piece {
  readonly word: string;
  readonly possessive: boolean;
}

/**
 * A chunk of plain letters with at most closing punctuation (`^([a-z]+)[.,;:?")]*$`, what
 * most chunks are): its word, which is itself; undefined for any other chunk.
 */
function plainWord(chunk: string): string | undefined {
  let end = 0;
  for (let c = chunk.charCodeAt(0); c >= 97 && c <= 122; c = chunk.charCodeAt(++end));
  if (end === 0) return undefined;
  for (let k = end; k < chunk.length; k++) {
    const c = chunk.charCodeAt(k);
    // . , ; : ? " )
    if (c !== 46 && c !== 44 && c !== 59 && c !== 58 && c !== 63 && c !== 34 && c !== 41) return undefined;
  }
  return end === chunk.length ? chunk : chunk.slice(0, end);
}

/** Whether a word is one character (one code point). */
function single(word: string): boolean {
  return word.length === 1 || (word.length === 2 && word.codePointAt(0)! > 0xffff);
}

/** A number with a unit or an ending ("1950s", "90s", "4th", "5k", "10pm"): not leetspeak ("0d" still reads "od"). */
const NUMBER_WITH_UNIT = /^(?:\d{2,}(?:s|'s)|\d+(?:st|nd|rd|th|k|am|pm|mm|cm|km|kg|mg|ml|mb|gb|tb|hz|fps|px))$/;

/** Whether a piece holds a digit or a symbol that leetspeak reads as a letter (`/[0-9$@|!€+]/`), by code. */
function leetish(piece: string): boolean {
  for (let k = 0; k < piece.length; k++) {
    const c = piece.charCodeAt(k);
    if ((c >= 48 && c <= 57) || c === 36 || c === 64 || c === 124 || c === 33 || c === 0x20ac || c === 43) return true;
  }
  return false;
}

/** Apostrophes and letters drawn with symbols (`|<`, `|-|`, `/\\`, `\\/\\/`). */
const SPELT_WITH_SYMBOLS = /['|/\\]/;

/** Letters and numbers past ASCII. */
const LETTERS_AND_NUMBERS = new CodePoints(ALNUM);

/** Whether a code point is a letter or a number (`[\p{L}\p{N}]`): ASCII by its code, the rest by its class. */
function letterOrNumber(code: number): boolean {
  if (code < 0x80) return ((code | 0x20) >= 97 && (code | 0x20) <= 122) || (code >= 48 && code <= 57);
  return LETTERS_AND_NUMBERS.has(code);
}

/** A letter, a number or a symbol leetspeak reads (`[\p{L}\p{N}$@|!€+]`): what a chunk's pieces are made of. */
function pieceCharacter(code: number): boolean {
  return code === 36 || code === 64 || code === 124 || code === 33 || code === 0x20ac || code === 43 || letterOrNumber(code);
}

/**
 * A chunk without what leads up to its first piece character and what follows its last letter,
 * number or apostrophe: `chunk.replace(/^[^\p{L}\p{N}$@|!€+]+|[^\p{L}\p{N}']+$/gu, '')`, by code
 * point, without the expression's try of its end at every position of a long chunk.
 */
export function trimChunk(chunk: string): string {
  let start = 0;
  while (start < chunk.length) {
    const code = chunk.codePointAt(start)!;
    if (pieceCharacter(code)) break;
    start += code > 0xffff ? 2 : 1;
  }
  let end = chunk.length;
  while (end > start) {
    const low = chunk.charCodeAt(end - 1);
    const pair = end - 2 >= start && low >= 0xdc00 && low <= 0xdfff && (chunk.charCodeAt(end - 2) & 0xfc00) === 0xd800;
    const code = pair ? chunk.codePointAt(end - 2)! : low;
    if (code === 39 || letterOrNumber(code)) break;
    end -= pair ? 2 : 1;
  }
  return start === 0 && end === chunk.length ? chunk : chunk.slice(start, end);
}

/**
 * The runs of piece characters of a body (`body.split(/[^\p{L}\p{N}$@|!€+]+/u)` without its empty
 * ends), in order, each handed to `take` (no array or iterator result made per piece).
 */
export function bodyPieces(body: string, take: (piece: string) => void): void {
  let start = -1;
  for (let at = 0; at < body.length;) {
    const code = body.codePointAt(at)!;
    const next = at + (code > 0xffff ? 2 : 1);
    if (pieceCharacter(code)) {
      if (start < 0) start = at;
    } else if (start >= 0) {
      take(body.slice(start, at));
      start = -1;
    }
    at = next;
  }
  if (start >= 0) take(body.slice(start));
}

/** The pieces of one whitespace-free chunk that is not a plain word: leetspeak undone, split at punctuation, pieces that form a known word merged. */
function readChunk(chunk: string, vocabulary: Vocabulary): Piece[] {
  let possessive = false;
  let body = trimChunk(chunk);
  // Only a body ending in ' or 's can be a possessive: the expression is not run over a long
  // chunk that ends otherwise (it walks the whole of it back from the end).
  const end = body.charCodeAt(body.length - 1);
  const owner = end === 39 || (end === 115 && body.charCodeAt(body.length - 2) === 39) ? /^(.*[\p{L}\p{N}])'(s?)$/u.exec(body) : null;
  if (owner) {
    if (owner[2] === 's' && CONTRACTED.has(owner[1]!)) body = owner[1]! + 's';
    else {
      body = owner[1]!;
      possessive = true;
    }
  }
  if (SPELT_WITH_SYMBOLS.test(body))
    body = body
      .replace(/'/g, '')
      .replace(/\|</g, 'k')
      .replace(/\|-\|/g, 'h')
      .replace(/\/\\/g, 'a')
      .replace(/\\\/\\\//g, 'w');
  // Only a part holding a digit or a symbol can read as other letters (and split at a symbol).
  const parts: string[] = [];
  bodyPieces(body, (p) => {
    if (!leetish(p)) parts.push(p);
    else for (const q of vocabulary.deleet(p).split(/[^\p{L}\p{N}]+/u)) if (q) parts.push(q);
  });
  if (parts.length > 1 && parts.every(single)) {
    return parts.map((word) => ({ word, possessive: false })); // "k.i.l.l": letters spelt out, read with the run they belong to
  }
  // "kill-your-self": adjacent pieces that together make a known word are one word. Only
  // spans no longer than a known word can be one, so each start tries a bounded number of
  // spans and the chunk costs time linear in its length ("xq-xq-xq-…" was cubic).
  const merged: string[] = [];
  for (let i = 0; i < parts.length;) {
    let j = vocabulary.mergeEnd(parts, i);
    let joined = j === i + 1 ? parts[i]! : parts.slice(i, j).join('');
    while (j > i + 1 && !vocabulary.knows(joined)) joined = joined.slice(0, joined.length - parts[--j]!.length);
    merged.push(joined);
    i = j;
  }
  return merged.map((word, i) => ({ word, possessive: possessive && i === merged.length - 1 }));
}

/**
 * An otherwise lower-case word with a capital I in it ("kiII", "sIaughter", "Iet", "5Iaughter"), read with
 * l for I when that makes a word and i does not; undefined to leave it as written. Digits in it are
 * leetspeak and are read as their letters for the comparison ("5Ieg" is "sieg", not "sleg"), but kept.
 */
function capitalIAsL(word: string, vocabulary: Vocabulary): string | undefined {
  if (word.length > vocabulary.longest || !/^[A-Za-z0-9][a-z0-9I]*$/.test(word) || !/[a-z]/.test(word)) return undefined;
  const lower = word.toLowerCase();
  const known = (w: string) => vocabulary.isWord(/\d/.test(w) ? vocabulary.deleet(w) : w);
  if (known(lower)) return undefined; // "Ill", "Ideas", "kIll" (a capital i)
  const rest = word.slice(1).replace(/I/g, 'l');
  const readings = [(word[0] === 'I' ? 'l' : word[0]!.toLowerCase()) + rest, lower[0] + rest];
  return readings.find(known);
}

/** Whether the unit at `i` is an ASCII letter or digit: digits belong to the word, leetspeak ("5Ieg") is one word with its letters. */
function letterOrDigitAt(text: string, i: number): boolean {
  const code = text.charCodeAt(i);
  const c = code | 0x20;
  return (c >= 97 && c <= 122) || (code >= 48 && code <= 57);
}

/** Each capital I of an otherwise lower-case word that reads as l ("kiII them" → "kill them"); before folding, which loses case. */
function capitalIs(text: string, vocabulary: Vocabulary): string {
  let out = '';
  let copied = 0;
  // Each word is read once, at its first I: the scan goes on from its end (linear in the text).
  for (let at = text.indexOf('I'); at >= 0; at = text.indexOf('I', at)) {
    let start = at;
    while (start > copied && letterOrDigitAt(text, start - 1)) start--;
    let end = at + 1;
    while (end < text.length && letterOrDigitAt(text, end)) end++;
    const reading = capitalIAsL(text.slice(start, end), vocabulary);
    if (reading !== undefined) {
      out += text.slice(copied, start) + reading;
      copied = end;
    }
    at = end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** Digits standing alone that read as a letter next to leetspeak ("m4k3 4 b0mb", "1 w4nt"). */
const LONE_LETTERS = new Map([
  ['4', 'a'],
  ['1', 'i'],
]);

/** Whether a chunk is a word written with digits for letters ("w4nt", "t34ch3r"), not a number or a name ("mp4"). */
function leetWord(chunk: string, vocabulary: Vocabulary): boolean {
  const body = chunk.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, '');
  if (body.length > vocabulary.longest || !/\p{L}/u.test(body) || !/\d/.test(body)) return false;
  const read = vocabulary.deleet(body);
  return /^\p{L}+$/u.test(read) && vocabulary.isWord(read);
}

/**
 * Whether a code unit is white space to `/\s/u`: ECMAScript's WhiteSpace (tab, vertical tab, form
 * feed, the byte order mark, Unicode's space separators) and LineTerminator.
 */
function whiteSpace(code: number): boolean {
  if (code < 0x80) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  return (
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/** `text.split(/\s+/u).filter(Boolean)`, by code, without the expression or a second array. */
export function whitespaceSplit(text: string): string[] {
  const chunks: string[] = [];
  let start = -1;
  for (let at = 0; at < text.length; at++) {
    if (!whiteSpace(text.charCodeAt(at))) {
      if (start < 0) start = at;
    } else if (start >= 0) {
      chunks.push(text.slice(start, at));
      start = -1;
    }
  }
  if (start >= 0) chunks.push(start === 0 ? text : text.slice(start));
  return chunks;
}

/** The whitespace-separated chunks of a text, a lone 4 or 1 read as "a" or "i" beside a leetspeak word. */
function chunksOf(text: string, vocabulary: Vocabulary): string[] {
  const chunks = whitespaceSplit(markMinorAges(fold(capitalIs(text, vocabulary))));
  for (let i = 0; i < chunks.length; i++) {
    const letter = chunks[i]!.length === 1 ? LONE_LETTERS.get(chunks[i]!) : undefined;
    if (letter === undefined) continue;
    if ((i > 0 && leetWord(chunks[i - 1]!, vocabulary)) || (i + 1 < chunks.length && leetWord(chunks[i + 1]!, vocabulary))) chunks[i] = letter;
  }
  return chunks;
}

/**
 * What tokenize gathers while it reads one text: its tokens and the run of single letters not
 * yet read. A class rather than closures made per text: every submission is tokenized.
 */
class TokenRun {
  readonly tokens: Token[] = [];
  private run: Piece[] = [];

  constructor(
    private readonly vocabulary: Vocabulary,
    private readonly names: ReadonlySet<string>,
  ) {}

  flush(): void {
    const { run, vocabulary, tokens } = this;
    if (run.length === 1) tokens.push(vocabulary.read(run[0]!.word, run[0]!.possessive));
    else if (run.length > 1) {
      const joined = vocabulary.deleet(run.map((p) => p.word).join(''));
      for (const word of vocabulary.segment(joined) ?? [joined]) tokens.push(vocabulary.read(word, false));
    }
    if (run.length > 0) this.run = [];
  }

  take(word: string, possessive: boolean): void {
    const { vocabulary, tokens } = this;
    // Single letters ("k i l l", "k.i.l.l", "a p i p e") are collected and read together.
    if (single(word)) {
      this.run.push({ word, possessive });
      return;
    }
    if (this.run.length > 0) this.flush();
    if (word.length >= 7 && lettersOnly(word) && !vocabulary.isWord(word)) {
      // Two words run together ("killyourself", "pipebomb"): split when both are known words of four letters or more.
      const at = vocabulary.splitInTwo(word);
      if (at !== undefined && at >= 4 && word.length - at >= 4) {
        tokens.push(vocabulary.read(word.slice(0, at), false), vocabulary.read(word.slice(at), possessive));
        return;
      }
    }
    tokens.push(this.names.has(word) ? { word, stem: stemOf(word), possessive } : vocabulary.read(word, possessive));
  }
}

/** The tokens of a text: folded, leetspeak undone, spelt-out letters joined and segmented, misspellings corrected, stemmed. */
export function tokenize(text: string, vocabulary: Vocabulary): Token[] {
  // A name inside a sentence is read as itself, not spell-corrected (names.ts).
  const reader = new TokenRun(vocabulary, properNames(text));
  for (const chunk of chunksOf(text, vocabulary)) {
    // Most chunks are a plain word: read as it is, without the chunk reader or a piece made for it.
    const plain = plainWord(chunk);
    if (plain !== undefined) reader.take(plain, false);
    else for (const piece of vocabulary.remembered(chunk, readChunk)) reader.take(piece.word, piece.possessive);
  }
  reader.flush();
  return reader.tokens;
}

/** The words of a text as the policy reads them (for tests and the eval report). */
export function words(text: string, vocabulary: Vocabulary): string[] {
  return tokenize(text, vocabulary).map((t) => t.word);
}
