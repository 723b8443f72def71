/**
 * The moderation vocabulary's tries of letters (normalize.ts: the prefixes of
 * its words and stems, and the one-letter deletions of its words from either
 * end), and the build's copy of them.
 *
 * Building them (tens of thousands of maps of maps, then packed into arrays)
 * was about a quarter of a start's CPU, and most of its garbage. The build
 * (scripts/build.ts) writes the packed arrays of the shipped policy's
 * vocabulary to dist/vocabulary, in one file named by a hash of the words
 * they were built from and of the code that builds them (normalize.ts, this
 * file, the stemmer); a vocabulary whose words and code match reads that file
 * (a few milliseconds, no garbage), any other (another policy, edited code, no
 * build) builds them as before. The arrays read are the arrays built, so every
 * reading is the same either way (test/unit/moderation-tries.test.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { writeWhole } from '../../write-whole.ts';

type PrefixNode = Map<string, PrefixNode>;

/** A packed trie as it is held: what `LetterTrie.packed` reads back. */
export interface PackedTrie {
  first: Int32Array;
  keys: Int32Array;
  nodes: Int32Array;
  rootAscii: Int32Array;
}

/**
 * A trie of letters: built as maps of maps, then packed into arrays (each node's children's keys
 * and nodes side by side, the root's ASCII children in a table), since a walk by the maps hashed a
 * one-letter string per step, thousands of times per hostile text. Nodes are numbers, the root 0,
 * none -1. A key is what was added, a UTF-16 code unit or (added by code point) a whole code point
 * past the BMP, which no code unit walked matches: the maps' string keys compared the same way.
 */
export class LetterTrie {
  private building: PrefixNode | undefined = new Map();
  /** A node's children are the edges from first[node] to first[node + 1]. */
  private first: Int32Array = new Int32Array(1);
  private keys: Int32Array = new Int32Array(0);
  private nodes: Int32Array = new Int32Array(0);
  private rootAscii: Int32Array = new Int32Array(128).fill(-1);

  /** A trie as `arrays` hold it (packed: it takes no word). */
  static packed(arrays: PackedTrie): LetterTrie {
    const trie = new LetterTrie();
    trie.building = undefined;
    ({ first: trie.first, keys: trie.keys, nodes: trie.nodes, rootAscii: trie.rootAscii } = arrays);
    return trie;
  }

  /** The packed arrays (for the build's copy); the trie must be packed. */
  arrays(): PackedTrie {
    if (this.building !== undefined) throw new Error('only a packed trie has arrays');
    return { first: this.first, keys: this.keys, nodes: this.nodes, rootAscii: this.rootAscii };
  }

  /** Adds the letters of `word` (strings of one code unit, or one code point). */
  add(word: Iterable<string>): void {
    if (this.building === undefined) throw new Error('a packed trie takes no more words');
    let node = this.building;
    for (const c of word) {
      let next = node.get(c);
      if (next === undefined) node.set(c, (next = new Map<string, PrefixNode>()));
      node = next;
    }
  }

  /** Packs the maps into the arrays, in breadth-first order; no word is added after. */
  pack(): void {
    const order: PrefixNode[] = [this.building ?? new Map<string, PrefixNode>()];
    for (let n = 0; n < order.length; n++) for (const child of order[n]!.values()) order.push(child);
    const ids = new Map(order.map((node, id) => [node, id]));
    this.first = new Int32Array(order.length + 1);
    this.keys = new Int32Array(order.length - 1);
    this.nodes = new Int32Array(order.length - 1);
    let edge = 0;
    order.forEach((node, id) => {
      this.first[id] = edge;
      for (const [c, child] of node) {
        this.keys[edge] = c.codePointAt(0)!;
        this.nodes[edge++] = ids.get(child)!;
        if (id === 0 && c.length === 1 && c.charCodeAt(0) < 128) this.rootAscii[c.charCodeAt(0)] = ids.get(child)!;
      }
    });
    this.first[order.length] = edge;
    this.building = undefined;
  }

  /** The child of `node` by the code unit `unit` (NaN past a string's end finds none); -1 when there is none. */
  child(node: number, unit: number): number {
    if (node === 0 && unit < 128) return this.rootAscii[unit]!;
    for (let e = this.first[node]!, end = this.first[node + 1]!; e < end; e++) if (this.keys[e] === unit) return this.nodes[e]!;
    return -1;
  }
}

/** Where the build keeps the shipped vocabulary's tries (scripts/build.ts writes them). */
export const BUILT_TRIES_DIR = path.resolve(import.meta.dirname, '../../../dist/vocabulary');

/** The file's first int: its layout's version (a file of another layout is not read). */
const LAYOUT = 1;

/**
 * The name of the copy of the tries built from `words` (in the order they were added) by the code
 * in `codeFiles` (the vocabulary's module), this file and the stemmer: what else decides them.
 */
export function builtTriesName(words: readonly string[], codeFiles: readonly string[]): string {
  const hash = crypto.createHash('sha1');
  for (const file of [...codeFiles, import.meta.filename, createRequire(import.meta.url).resolve('stemmer')]) hash.update(fs.readFileSync(file)).update('\0');
  return `${hash.update(words.join('\n')).digest('hex')}.tries`;
}

/**
 * The build's copy of `count` tries named `name` in `dir` (each file whole, or none): undefined
 * when there is none, or it does not have the layout and lengths it says.
 */
export function readBuiltTries(dir: string, name: string, count: number): LetterTrie[] | undefined {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(path.join(dir, name));
  } catch {
    return undefined;
  }
  if (bytes.byteLength % 4 !== 0) return undefined;
  // Copied out, so the arrays start on a 4-byte boundary whatever buffer the read gave.
  const all = new Int32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  // Layout: LAYOUT, count, then per trie its node count n and its first (n + 1), keys (n − 1), nodes (n − 1) and rootAscii (128).
  if (all.length < 2 || all[0] !== LAYOUT || all[1] !== count) return undefined;
  const tries: LetterTrie[] = [];
  let at = 2;
  const take = (n: number) => all.subarray(at, (at += n));
  for (let t = 0; t < count; t++) {
    const n = all[at++];
    if (n === undefined || n < 1 || at + 3 * n + 127 > all.length) return undefined;
    tries.push(LetterTrie.packed({ first: take(n + 1), keys: take(n - 1), nodes: take(n - 1), rootAscii: take(128) }));
  }
  return at === all.length ? tries : undefined;
}

/** For the build: writes `tries` (packed) as `name` into `dir`, whole, then renamed (a start never reads half a file). */
export function writeBuiltTries(dir: string, name: string, tries: readonly LetterTrie[]): void {
  const parts: Int32Array[] = [Int32Array.of(LAYOUT, tries.length)];
  for (const trie of tries) {
    const { first, keys, nodes, rootAscii } = trie.arrays();
    parts.push(Int32Array.of(first.length - 1), first, keys, nodes, rootAscii);
  }
  fs.mkdirSync(dir, { recursive: true });
  writeWhole(path.join(dir, name), Buffer.concat(parts.map((p) => new Uint8Array(p.buffer, p.byteOffset, p.byteLength))));
}
