/**
 * The English dictionary the embedded moderation asks (the word-list package),
 * to tell misspellings from real words: one sorted string and where each word
 * starts (about 4 MB, where a Set of its 274,000 words would hold seven times
 * that), and a Bloom filter of its words (512 KiB) that answers most words it
 * does not hold without the binary search: misspellings, letter runs and
 * leetspeak ask for such words most.
 *
 * Building it (splitting, sorting and joining 2.8 MB of words, hashing each
 * into the filter) took a few hundred milliseconds of every start. The build
 * (scripts/build.ts) writes it to dist/dictionary once: the sorted text, the
 * starts and the filter as they are held, and the word list's size and time and
 * this file's text it was made from; a start that still matches reads those (a
 * few milliseconds), any other (no build, another word list, this code changed)
 * builds it as before.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import wordListPath from 'word-list';
import { writeWhole } from '../../write-whole.ts';

export interface Dictionary {
  text: string;
  starts: Int32Array;
  filter: Int32Array;
}

/** Where the build keeps the dictionary as it is held (scripts/build.ts writes it). */
export const BUILT_DICTIONARY_DIR = path.resolve(import.meta.dirname, '../../../dist/dictionary');
const SOURCE = 'source.json';
const TEXT = 'words.txt';
const INDEX = 'index.bin';

let dictionary: Dictionary | undefined;
/** The filter's bits (a power of two) and probes per word: about 15 bits a word, under 0.1 % false positives. */
const FILTER_BITS = 1 << 22;
const FILTER_PROBES = 4;

/** Two hashes of the code units from `at` to `end` of `text` (FNV-1a and a multiplicative one), for the filter's probes. */
function filterHashes(text: string, at: number, end: number): [number, number] {
  let h1 = 0x811c9dc5;
  let h2 = 0;
  for (let k = at; k < end; k++) {
    const c = text.charCodeAt(k);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 + c, 0x5bd1e995) ^ (h2 >>> 15);
  }
  return [h1 >>> 0, (h2 | 1) >>> 0];
}

function maybeInFilter(filter: Int32Array, word: string): boolean {
  const [h1, h2] = filterHashes(word, 0, word.length);
  for (let i = 0; i < FILTER_PROBES; i++) {
    const bit = (h1 + Math.imul(i, h2)) & (FILTER_BITS - 1);
    if ((filter[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
  }
  return true;
}

/** The dictionary built from the word list. */
export function fromWordList(): Dictionary {
  const text = fs.readFileSync(wordListPath, 'utf8').split('\n').filter(Boolean).sort().join('\n') + '\n';
  const starts = new Int32Array(text.split('\n').length - 1);
  const filter = new Int32Array(FILTER_BITS >>> 5);
  for (let i = 0, at = 0; i < starts.length; i++) {
    const end = text.indexOf('\n', at);
    starts[i] = at;
    const [h1, h2] = filterHashes(text, at, end);
    for (let p = 0; p < FILTER_PROBES; p++) {
      const bit = (h1 + Math.imul(p, h2)) & (FILTER_BITS - 1);
      filter[bit >>> 5] |= 1 << (bit & 31);
    }
    at = end + 1;
  }
  return { text, starts, filter };
}

/**
 * What the copy is made from, to match the build's copy against: the word list's size and time,
 * and this file's own text (the tests and `npm run dev` run the sources, so a copy made by an
 * older version of this code must not be read by a newer one).
 */
function sourceStamp(): { size: number; mtimeMs: number; code: string } {
  const st = fs.statSync(wordListPath);
  const code = crypto
    .createHash('sha1')
    .update(fs.readFileSync(import.meta.filename))
    .digest('hex');
  return { size: st.size, mtimeMs: st.mtimeMs, code };
}

/** The build's copy, when it was made from the word list as it is now (same size and time) by this code; else undefined. */
export function fromBuild(dir: string): Dictionary | undefined {
  let source: { size?: unknown; mtimeMs?: unknown; code?: unknown; words?: unknown; filterBits?: unknown };
  try {
    source = JSON.parse(fs.readFileSync(path.join(dir, SOURCE), 'utf8')) as typeof source;
  } catch {
    return undefined;
  }
  const now = sourceStamp();
  if (source.size !== now.size || source.mtimeMs !== now.mtimeMs || source.code !== now.code) return undefined;
  if (source.filterBits !== FILTER_BITS || typeof source.words !== 'number') return undefined;
  try {
    const text = fs.readFileSync(path.join(dir, TEXT), 'utf8');
    const index = fs.readFileSync(path.join(dir, INDEX));
    // Copied out, so the arrays start on a 4-byte boundary whatever buffer the read gave.
    const all = new Int32Array(index.buffer.slice(index.byteOffset, index.byteOffset + index.byteLength));
    if (all.length !== source.words + (FILTER_BITS >>> 5)) return undefined;
    return { text, starts: all.subarray(0, source.words), filter: all.subarray(source.words) };
  } catch {
    return undefined;
  }
}

/** For the build: writes the dictionary as it is held into `dir` (each file whole, then renamed). */
export function writeBuiltDictionary(dir = BUILT_DICTIONARY_DIR): void {
  const stamp = sourceStamp();
  const { text, starts, filter } = fromWordList();
  fs.mkdirSync(dir, { recursive: true });
  const index = new Int32Array(starts.length + filter.length);
  index.set(starts);
  index.set(filter, starts.length);
  const write = (name: string, data: string | Uint8Array) => writeWhole(path.join(dir, name), data);
  // The source note last: a start reads the copy only once it names the word list, so never a half-written one.
  fs.rmSync(path.join(dir, SOURCE), { force: true });
  write(TEXT, text);
  write(INDEX, new Uint8Array(index.buffer));
  write(SOURCE, JSON.stringify({ ...stamp, words: starts.length, filterBits: FILTER_BITS }));
}

/** Reads the dictionary now (the build's copy, or built from the word list), if not yet read. */
export function readDictionary(dir = BUILT_DICTIONARY_DIR): void {
  dictionary ??= fromBuild(dir) ?? fromWordList();
}

/** Whether the dictionary holds `word` (read on first use). */
export function inDictionary(word: string): boolean {
  readDictionary();
  const { text, starts, filter } = dictionary!;
  if (!maybeInFilter(filter, word)) return false;
  let lo = 0;
  let hi = starts.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const order = compareEntry(text, starts[mid]!, word);
    if (order === 0) return true;
    if (order < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/** The dictionary entry at `at` (ended by a newline) against `word`, in code-unit order, without copying it out. */
function compareEntry(text: string, at: number, word: string): number {
  for (let k = 0; ; k++) {
    const c = text.charCodeAt(at + k);
    if (k === word.length) return c === 10 ? 0 : 1;
    if (c === 10) return -1;
    const w = word.charCodeAt(k);
    if (c !== w) return c < w ? -1 : 1;
  }
}
