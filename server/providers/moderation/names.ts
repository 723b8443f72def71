/**
 * Proper names are not misspellings. Spelling correction reads a word no
 * dictionary holds as the policy word one edit away ("murdr" → "murder"); a
 * name written as one, with a capital inside a sentence ("why did Hamlet kill
 * Polonius"), is read as itself instead ("Polonius" is no "polonium"). Only a
 * capital followed by lower-case letters counts, so shouting ("KILL") and the
 * capital-I trick ("kiII") are read as before, and a sentence's first word is
 * never taken for a name.
 *
 * One regular-expression pass over the text: linear in its length.
 */
/** A capitalised word (a capital, then lower-case letters only) not at the start of a sentence. */
// The lookahead first, so that the lookbehinds (which walk back over white space) run only
// where a name begins: each run of white space is walked once.
const NAME = /(?=\p{Lu}\p{Ll}{2})(?<=[\s,(])(?<![.!?:;"«»„“”]\s*)\p{Lu}\p{Ll}{2,}(?![\p{L}\p{N}])/gu;

/** The capitalised words of `text` that stand inside a sentence, case folded as tokenize reads them. */
export function properNames(text: string): ReadonlySet<string> {
  // Most prompts have no capital past their first word: one native scan says so.
  if (!/[\s,(]\p{Lu}/u.test(text)) return EMPTY;
  const names = new Set<string>();
  // exec over the one global expression: matchAll would make a copy of it for every text.
  NAME.lastIndex = 0;
  for (let m = NAME.exec(text); m !== null; m = NAME.exec(text)) names.add(caseFolded(m[0]));
  return names;
}

/** A name as tokenize reads it: no marks, lower case (an ASCII name has no marks to strip). */
function caseFolded(name: string): string {
  for (let k = 0; k < name.length; k++) if (name.charCodeAt(k) >= 0x80) return name.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
  return name.toLowerCase();
}

const EMPTY: ReadonlySet<string> = new Set();
