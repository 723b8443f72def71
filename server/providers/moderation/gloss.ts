/**
 * Reads text in Spanish, French, German, Portuguese (and, less fully, Italian
 * and Dutch) with the English policy: each word the glossaries (glossary.ts)
 * know is replaced by its English gloss, phrases first ("paso a paso" → "step
 * by step", "gas mostaza" → "mustard gas", in English order), then whole
 * words, then (once the text reads as that language) stems ("envenenaron" →
 * "poison") and German and Dutch compounds by their head ("Rohrbombe" →
 * "pipe bomb", "Flüchtlingsheime" → "refugee homes"). Words it does not know
 * stay as written, so names and English words mixed in still count.
 *
 * A text the language detector does not place is glossed only where its words
 * are in no English dictionary, and only when at least two are: "matar a mi
 * vecino" is read, "Roma tomatoes" or "a son and a die" are not. One pass over
 * the words, each looked up a bounded number of times: linear in the text.
 */
import { fold } from './normalize.ts';
import { GLOSSARIES } from './glossary.ts';

interface Phrase {
  words: string[];
  gloss: string;
}

interface Table {
  words: Map<string, string>;
  /** Phrases by their first word, longest first. */
  phrases: Map<string, Phrase[]>;
  stems: Map<string, string>;
  longestStem: number;
  compounds: boolean;
  /** Separable verbs by their particle, which closes the clause ("bringe … um" → kill). */
  separable: Map<string, Array<{ verb: string; gloss: string }>>;
}

/** The most letters a word may have to be looked up by stem or split as a compound. */
const LONGEST_WORD = 40;
const SHORTEST_STEM = 4;
/** The shortest head or modifier of a compound ("gas", "lkw"). */
const SHORTEST_PART = 3;

const split = (text: string) => text.split(/[^\p{L}\p{N}]+/u).filter(Boolean);

function parse(source: string, compounds: boolean): Table {
  const table: Table = { words: new Map(), phrases: new Map(), stems: new Map(), longestStem: 0, compounds, separable: new Map() };
  for (const line of source.split('\n')) {
    const at = line.indexOf('=');
    if (at < 0) continue;
    const gloss = line.slice(at + 1).trim();
    for (const form of line.slice(0, at).trim().split(/\s+/)) {
      if (!form) continue;
      const parted = /^([^+]+)\+([^+]+)$/u.exec(form);
      if (parted) {
        const particle = fold(parted[2]!);
        const list = table.separable.get(particle) ?? [];
        list.push({ verb: fold(parted[1]!), gloss });
        table.separable.set(particle, list);
        continue;
      }
      if (form.endsWith('*')) {
        const stem = fold(form.slice(0, -1));
        table.stems.set(stem, gloss);
        table.longestStem = Math.max(table.longestStem, stem.length);
        continue;
      }
      const words = split(fold(form.replace(/_/g, ' ')));
      if (words.length === 1) table.words.set(words[0]!, gloss);
      else if (words.length > 1) {
        const list = table.phrases.get(words[0]!) ?? [];
        list.push({ words, gloss });
        list.sort((a, b) => b.words.length - a.words.length);
        table.phrases.set(words[0]!, list);
      }
    }
  }
  return table;
}

const TABLES = new Map(Object.entries(GLOSSARIES).map(([language, source]) => [language, parse(source, language === 'de' || language === 'nl')]));

/**
 * Look-ups made while glossing, counted so that tests can show the work grows linearly with
 * the text's length without timing it.
 */
export const glossWork = { lookups: 0 };

/** The languages a gloss reads. */
export const GLOSSED_LANGUAGES: readonly string[] = [...TABLES.keys()];

function phraseAt(words: string[], i: number, table: Table): Phrase | undefined {
  glossWork.lookups++;
  for (const p of table.phrases.get(words[i]!) ?? []) {
    glossWork.lookups++;
    if (i + p.words.length > words.length) continue;
    let k = 1;
    while (k < p.words.length && words[i + k] === p.words[k]) k++;
    if (k === p.words.length) return p;
  }
  return undefined;
}

function byStem(word: string, table: Table): string | undefined {
  for (let n = Math.min(word.length, table.longestStem); n >= SHORTEST_STEM; n--) {
    glossWork.lookups++;
    const gloss = table.stems.get(word.slice(0, n));
    if (gloss !== undefined) return gloss;
  }
  return undefined;
}

/** A compound read by its longest known head, with its modifier when that is known too (a linking s dropped). */
function byCompound(word: string, table: Table): string | undefined {
  for (let k = SHORTEST_PART; k <= word.length - SHORTEST_PART; k++) {
    glossWork.lookups++;
    const head = table.words.get(word.slice(k)) ?? byStem(word.slice(k), table);
    if (head === undefined) continue;
    const modifier = word.slice(0, k);
    const first = table.words.get(modifier) ?? (modifier.endsWith('s') ? table.words.get(modifier.slice(0, -1)) : undefined);
    return first ? `${first} ${head}` : head;
  }
  // No known head: the modifier alone ("Nacktfoto": naked).
  for (let n = word.length - SHORTEST_PART; n >= SHORTEST_STEM; n--) {
    glossWork.lookups++;
    const first = table.words.get(word.slice(0, n));
    if (first !== undefined) return first;
  }
  return undefined;
}

/** How a clause of words reads, appended to `out`; returns how many words the glossaries knew. */
function readClause(clause: string[], tables: readonly Table[], placed: Table, out: string[]): number {
  let words = clause;
  // A separable verb: its particle closes the clause, its verb stands earlier ("wie bringe ich ihn um").
  let parted: { at: number; gloss: string } | undefined;
  const particle = placed.separable.get(words[words.length - 1] ?? '');
  if (particle) {
    for (const { verb, gloss } of particle) {
      const at = words.indexOf(verb);
      if (at >= 0 && at < words.length - 1) {
        parted = { at, gloss };
        words = words.slice(0, -1);
        break;
      }
    }
  }
  const first = out.length;
  let hits = 0;
  let lastGlossed = -1;
  for (let i = 0; i < words.length;) {
    const word = words[i]!;
    let read: string | undefined = parted?.at === i ? parted.gloss : undefined;
    let length = 1;
    // Phrases of any of the languages first, then whole words, then the stems of the text's own.
    for (let t = 0; read === undefined && t < tables.length; t++) {
      const phrase = phraseAt(words, i, tables[t]!);
      if (phrase) {
        read = phrase.gloss;
        length = phrase.words.length;
      }
    }
    for (let t = 0; read === undefined && t < tables.length; t++) {
      glossWork.lookups++;
      read = tables[t]!.words.get(word);
    }
    if (read === undefined && word.length <= LONGEST_WORD) {
      read = byStem(word, placed) ?? (placed.compounds ? byCompound(word, placed) : undefined);
    }
    if (read === undefined) out.push(word);
    else {
      if (read) {
        out.push(read);
        lastGlossed = out.length - 1;
      }
      hits++;
    }
    i += length;
  }
  // German and Dutch put the verb last ("meine Frau vergiften"): a glossed last word is read
  // first, where English puts it ("poison … my wife"), after a leading "how to";
  // only an infinitive or participle in -en moves, not a noun ("ein Lied").
  if (placed.compounds && lastGlossed === out.length - 1 && out.length - first > 1 && words[words.length - 1]!.endsWith('en')) {
    const verb = out.pop()!;
    // Before the object: its first determiner ("meine Frau" → "my wife"), else at the clause's start.
    let at = first;
    while (at < out.length && !OBJECT_STARTS.has(out[at]!)) at++;
    if (at === out.length) at = out[first] === 'how to' ? first + 1 : first;
    out.splice(at, 0, verb);
  }
  return hits;
}

/** Glosses that open the object of a verb-final clause, where English puts the verb. */
const OBJECT_STARTS = new Set(['my', 'your', 'their', 'the', 'a', 'someone', 'people', 'it', 'them']);

/** German and Dutch "and" and "or". */
const CONJUNCTIONS = new Map([
  ['und', 'and'],
  ['oder', 'or'],
  ['en', 'and'],
  ['of', 'or'],
]);

/** Words, and the punctuation that ends a clause (where a verb-final language ends its verbs). */
const WORDS_AND_CLAUSES = /[\p{L}\p{N}]+|[.,;:!?¿¡()"]/gu;

/** The characters of an unplaced text read to place it. */
const PLACING_CHARS = 2_000;

/** Each word of any glossary → the glossaries holding it, to place a text in one look-up per word. */
const TABLES_OF = new Map<string, Table[]>();
for (const table of TABLES.values()) {
  for (const word of table.words.keys()) {
    const list = TABLES_OF.get(word) ?? [];
    list.push(table);
    TABLES_OF.set(word, list);
  }
}

/** An ASCII letter or digit as 0 to 35 (a to z, 0 to 9); -1 for anything else. */
function symbol(code: number): number {
  if (code >= 97 && code <= 122) return code - 97;
  if (code >= 48 && code <= 57) return code - 22;
  return -1;
}

/**
 * The shape of the word from `start` to `end` of `text`: its length (31 at most), its first two
 * and its last character; -1 when one of those is no lower-case ASCII letter or digit.
 */
function shapeAt(text: string, start: number, end: number): number {
  const first = symbol(text.charCodeAt(start));
  const second = symbol(text.charCodeAt(start + 1));
  const last = symbol(text.charCodeAt(end - 1));
  if (first < 0 || second < 0 || last < 0) return -1;
  return ((first * 36 + second) * 36 + last) * 32 + Math.min(end - start, 31);
}

/** The shapes of the glossaries' words (of three characters or more): an English word seldom has one (one in fourteen of the everyday prompts'). */
const GLOSSED_SHAPES: ReadonlySet<number> = new Set(
  [...TABLES_OF.keys()]
    .filter((w) => w.length > 2)
    .map((w) => shapeAt(w, 0, w.length))
    .filter((shape) => shape >= 0),
);

/** The glossary an unplaced text's words belong to, counting only words no English dictionary holds. */
class Placement {
  /** Made at the first glossary word: most texts hold none. */
  private counts: Map<Table, number> | undefined;
  private english: Map<string, boolean> | undefined;
  private best: Table | undefined;
  private most = 0;
  private longer = 0;

  constructor(private readonly isEnglish: (word: string) => boolean) {}

  add(w: string): void {
    // Short words ("a", "de", "me") are too common across languages to place a text.
    if (w.length <= 2) return;
    this.unknown();
    const tables = TABLES_OF.get(w);
    if (tables === undefined) return;
    const english = (this.english ??= new Map<string, boolean>());
    let known = english.get(w);
    if (known === undefined) english.set(w, (known = this.isEnglish(w)));
    if (known) return;
    const counts = (this.counts ??= new Map<Table, number>());
    for (const t of tables) {
      const n = (counts.get(t) ?? 0) + 1;
      counts.set(t, n);
      if (n > this.most) {
        this.best = t;
        this.most = n;
      }
    }
  }

  /** Counts a word longer than two letters that no glossary holds (`add` counts it so too, before its look-up). */
  unknown(): void {
    this.longer++;
    glossWork.lookups++;
  }

  /** Two such words at least, and one in eight of the longer words: a few borrowed words do not make English text another language. */
  placed(): Table | undefined {
    return this.most >= 2 && this.most * 8 >= this.longer ? this.best : undefined;
  }
}

/**
 * The glossary a folded text's words (WORDS_AND_CLAUSES) belong to. Plain ASCII (nearly every
 * text) is read by its codes, each run of letters and digits a word, without the expression's
 * array of every word and mark; anything else by the expression.
 */
function placeByWords(folded: string, isEnglish: (word: string) => boolean): Table | undefined {
  const ascii = new Placement(isEnglish);
  let start = -1;
  for (let at = 0; at <= folded.length; at++) {
    const code = at < folded.length ? folded.charCodeAt(at) : 0x20; // a space past the end closes the last word
    if (code >= 0x80) {
      const placement = new Placement(isEnglish);
      for (const w of folded.match(WORDS_AND_CLAUSES) ?? []) placement.add(w);
      return placement.placed();
    }
    const c = code | 0x20;
    if ((c >= 97 && c <= 122) || (code >= 48 && code <= 57)) {
      if (start < 0) start = at;
    } else if (start >= 0) {
      // A word whose shape no glossary word has is none of theirs: counted without a copy or a look-up.
      if (at - start > 2) {
        const shape = shapeAt(folded, start, at);
        if (shape < 0 || GLOSSED_SHAPES.has(shape)) ascii.add(folded.slice(start, at));
        else ascii.unknown();
      }
      start = -1;
    }
  }
  return ascii.placed();
}

/**
 * The English reading of `text` when it holds words of the glossed languages; undefined when
 * there is nothing to read. `language`: what the detector made of the text (undefined: English
 * or too little to tell); `isEnglish`: whether a word is English. An unplaced text whose words
 * of one language, English ones aside, number two or more is read as that language ("matar a
 * mi vecino").
 */
export function gloss(text: string, language: string | undefined, isEnglish: (word: string) => boolean): string | undefined {
  let placed = language !== undefined ? TABLES.get(language) : undefined;
  if (language !== undefined && placed === undefined) return undefined;
  if (placed === undefined) {
    // Its opening is enough to place a text the detector did not, and bounds what an English
    // text (nearly every text) pays for the question: folding is the costly part.
    placed = placeByWords(fold(text.slice(0, PLACING_CHARS)), isEnglish);
    if (placed === undefined) return undefined;
  }
  const pieces = fold(text).match(WORDS_AND_CLAUSES) ?? [];
  const tables = [placed, ...[...TABLES.values()].filter((t) => t !== placed)];
  const out: string[] = [];
  let hits = 0;
  let clause: string[] = [];
  for (const piece of pieces) {
    const conjunction = placed.compounds ? CONJUNCTIONS.get(piece) : undefined;
    const ends = piece.length === 1 && !/[\p{L}\p{N}]/u.test(piece);
    if (!ends && conjunction === undefined) {
      clause.push(piece);
      continue;
    }
    // A verb-final language ends a verb at each "and" and "or" too ("erstechen und die Leiche verstecken").
    if (clause.length > 0) hits += readClause(clause, tables, placed, out);
    if (conjunction !== undefined) out.push(conjunction);
    clause = [];
  }
  if (clause.length > 0) hits += readClause(clause, tables, placed, out);
  return hits >= 1 ? out.join(' ') : undefined;
}
