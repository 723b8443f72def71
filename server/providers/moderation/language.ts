/**
 * Which language a text is written in, as far as the embedded policy needs to
 * know: its concepts are English, so text in another language is not judged by
 * it (policies.md, "Other languages"). A LanguageDetector is a small interface
 * so that a packaged identifier can take the place of the stop-word detector
 * below: the most common function words of Spanish, French, German,
 * Portuguese, Italian and Dutch (only those English does not also use: "die",
 * "was", "also" and "in" are left out), counted against English's.
 */
import { fold, isLetter, withoutFormat } from './normalize.ts';

export interface LanguageDetector {
  /** The ISO 639-1 code of the language `text` is written in when it is not English (`und`: another script); undefined for English or too little to tell. */
  detect(text: string): string | undefined;
}

/** Language names for messages and docs. */
export const LANGUAGE_NAMES: Readonly<Record<string, string>> = {
  es: 'Spanish',
  fr: 'French',
  de: 'German',
  pt: 'Portuguese',
  it: 'Italian',
  nl: 'Dutch',
  und: 'a script other than Latin',
};

const STOP_WORDS: Record<string, string> = {
  en: `the and of to is are was were be been with that this these those for you your what how why who which where when
    it its they them their there here from have has had not but or if then than would could should will can please make
    draw show write give photo picture image song story about into over under very some any all my me our we he she his her`,
  es: `el la los las un una unos unas del al y o pero que qué como cómo por para con sin sobre entre es son está están fue
    ser estar hay muy más mi mis tu tus su sus yo tú él ella nosotros ellos ellas esto esta este eso esa ese le les lo se
    cuando donde dónde porque también ya quiero puedo hacer dibuja dibujo foto imagen canción historia hasta desde nos
    tengo tiene mucho mucha todo todos toda todas otro otra cual cuál quién quien ahora aquí así bien`,
  fr: `le la les un une des du de et ou mais que qui quoi comment pour avec sans sur sous dans est sont était être avoir
    il elle ils elles nous vous je tu mon ma mes ton ta tes son sa ses leur leurs ce cette ces cet au aux pas ne plus très
    aussi quand où parce veux peux faire dessine photo chanson histoire moi toi lui y en ça cela tout tous toute avec chez`,
  de: `der das den dem des ein eine einen einem einer und oder aber dass wie warum wer wo wann für mit ohne über unter ist
    sind war waren sein haben hat ich du er sie wir ihr es mein meine dein deine sein seine ihre nicht kein keine auch sehr
    noch nur schon zum zur vom beim bitte mach mache zeichne bild foto lied geschichte einen mir dich mich uns euch auf aus bei nach von zu`,
  pt: `o a os as um uma uns umas do da dos das no na nos nas ao e ou mas que como por para com sem sobre entre é são está
    estão foi ser estar há muito mais meu minha meus minhas teu tua seu sua eu tu ele ela nós eles elas isto isso este esta
    esse essa quando onde porque também já quero posso fazer desenhe foto imagem canção história até desde não você vocês`,
  it: `il lo la gli le un uno una del della dei delle dello e o ma che come perché per con senza sopra tra fra è sono era
    essere avere ho hai ha abbiamo io tu lui lei noi voi loro mio mia miei tuo tua suo sua questo questa quello quella non
    anche molto più quando dove voglio posso fare disegna foto immagine canzone storia sul sulla nel nella alla al ci si`,
  nl: `de het een en of maar dat wat hoe waarom wie waar wanneer voor met zonder over onder is zijn was waren hebben heeft
    ik jij je hij zij wij jullie mijn jouw zijn haar ons onze niet geen ook heel nog alleen naar bij uit op aan te maak
    teken foto afbeelding lied verhaal alsjeblieft deze dit die er hier daar mij hem`,
};

/** English's function words (and the commonest request verbs), which say nothing of what a text is about. */
export const ENGLISH_FUNCTION_WORDS: readonly string[] = STOP_WORDS.en.split(/\s+/).filter(Boolean);

/** The other languages' function words, folded as the policy reads them ("cómo" → "como"): they say which language a text is in, not what it is about. */
export const OTHER_FUNCTION_WORDS: readonly string[] = Object.entries(STOP_WORDS)
  .filter(([language]) => language !== 'en')
  .flatMap(([, list]) => list.split(/\s+/).filter(Boolean))
  .map((word) => word.normalize('NFD').replace(/\p{M}+/gu, ''));

/** Words several of these languages share with English or with each other beyond use: they count for nobody. */
const AMBIGUOUS = new Set([
  'a',
  'o',
  'e',
  'y',
  'i',
  'in',
  'die',
  'was',
  'also',
  'an',
  'so',
  'am',
  'war',
  'me',
  'no',
  'son',
  'come',
  'per',
  'van',
  'foto',
  'photo',
  'en',
  'is',
]);

const plain = (word: string) => word.normalize('NFD').replace(/\p{M}+/gu, '');

/** Each stop word → the languages it belongs to. */
const LANGUAGES_OF = new Map<string, string[]>();
for (const [language, list] of Object.entries(STOP_WORDS)) {
  for (const word of list.split(/\s+/)) {
    const w = plain(word);
    if (!w || AMBIGUOUS.has(w)) continue;
    const languages = LANGUAGES_OF.get(w) ?? [];
    if (!languages.includes(language)) languages.push(language);
    LANGUAGES_OF.set(w, languages);
  }
}
/** The longest function word: longer words are not looked up. */
const LONGEST = Math.max(...[...LANGUAGES_OF.keys()].map((w) => w.length));

// A word English holds is English's, whatever else holds it too ("de" stays, "on" is English).
for (const [word, languages] of LANGUAGES_OF) if (languages.includes('en') && languages.length > 1) LANGUAGES_OF.set(word, ['en']);

/** The bits of the table of function words' hashes (a power of two past eight times their number). */
const HASH_BITS = 1 << 16;

/** A word's hash as scanFunctionWords makes it, unit by unit (FNV-1a). */
const hashStep = (hash: number, unit: number) => Math.imul(hash ^ unit, 0x01000193);
const HASH_START = 0x811c9dc5 | 0;

/**
 * A bit per hash of a function word written in a to z (by the hash's low bits): a plain
 * ASCII word whose bit is clear is no function word, found so without a copy or a look-up (a
 * word whose bit is set is looked up).
 */
const FUNCTION_WORD_HASHES = new Uint8Array(HASH_BITS >>> 3);
for (const word of LANGUAGES_OF.keys()) {
  let hash = HASH_START;
  for (let i = 0; i < word.length; i++) hash = hashStep(hash, word.charCodeAt(i));
  FUNCTION_WORD_HASHES[(hash & (HASH_BITS - 1)) >>> 3]! |= 1 << (hash & 7);
}

/** Fewest function words of one language before a text is taken to be written in it. */
const MIN_HITS = 2;

/** Particles of names English writes too ("de la Soul", "El Capitan", "van Gogh"): half a word each. */
const PARTICLES = new Set(['de', 'la', 'le', 'el', 'du', 'da', 'di', 'del', 'della', 'von', 'der', 'den', 'des', 'los', 'las', 'les', 'het']);

/** Whether most of a text's letters are of a script other than Latin (as written, before look-alikes are folded). */
function otherScript(text: string): boolean {
  // Text with no letter of another script (most text with a dash or a curly quote) is not.
  if (!OTHER_SCRIPT_LETTER.test(text)) return false;
  // Two native scans rather than a test per character (astral letters count twice: close enough).
  const letters = text.replace(/\P{L}+/gu, '').length;
  if (letters < 3) return false;
  const latin = text.replace(/\P{Script=Latin}+/gu, '').length;
  return latin * 2 < letters;
}

/** A letter of a script other than Latin. */
const OTHER_SCRIPT_LETTER = /(?!\p{Script=Latin})\p{L}/u;

/** Anything past Latin Extended-B: only then is NFKC needed, or can another script be most of the text. */
const BEYOND_LATIN = /[\u0250-\uFFFF]/u;

/**
 * Whether a lower-cased text holds a function word of a language other than English, its
 * function words added to `words` when given (without, the scan stops at the first such word).
 * The runs of letters (what a split at /\P{L}+/u gives): ASCII letters by their code, anything
 * past ASCII by a test; a word of a to z only is hashed as it is scanned and copied only when
 * its hash is a function word's, so an English text (nearly every text) is read with few copies.
 */
function scanFunctionWords(lower: string, words: Set<string> | undefined): boolean {
  let other = false;
  let start = -1;
  let ascii = true;
  let hash = HASH_START;
  for (let at = 0; at <= lower.length;) {
    const code = at < lower.length ? lower.charCodeAt(at) : 0x20; // a space past the end closes the last word
    let size = 1;
    let letter: boolean;
    if (code < 0x80)
      letter = (code | 0x20) >= 97 && (code | 0x20) <= 122; // NFKC can make a capital ("ℌ")
    else {
      const point = lower.codePointAt(at)!;
      size = point > 0xffff ? 2 : 1;
      letter = isLetter(point);
    }
    if (letter) {
      if (start < 0) {
        start = at;
        ascii = true;
        hash = HASH_START;
      }
      if (code < 97 || code > 122) ascii = false;
      else hash = hashStep(hash, code);
    } else if (start >= 0) {
      if (consider(words, lower, start, at, ascii, hash)) {
        other = true;
        if (words === undefined) return true;
      }
      start = -1;
    }
    at += size;
  }
  return other;
}

/**
 * Adds the word from `start` to `end` to `words` when it is a function word (`ascii`: it is of a
 * to z only, and `hash` is its hash); returns whether it is one of a language other than English.
 */
function consider(words: Set<string> | undefined, lower: string, start: number, end: number, ascii: boolean, hash: number): boolean {
  // Most words are no function word: a length test and the table of hashes; only accented ones are stripped.
  if (end - start < 2 || end - start > LONGEST) return false;
  if (ascii && (FUNCTION_WORD_HASHES[(hash & (HASH_BITS - 1)) >>> 3]! & (1 << (hash & 7))) === 0) return false;
  let word = lower.slice(start, end);
  let languages = LANGUAGES_OF.get(word);
  if (languages === undefined && !ascii) languages = LANGUAGES_OF.get((word = plain(word)));
  if (languages === undefined) return false;
  words?.add(word);
  return languages[0] !== 'en';
}

/**
 * The stop-word detector: a text is in language L when its distinct function words of L
 * (particles half) number at least two, more than twice English's and more than any other
 * language's. A text mostly in another script is `und`, unless the words of its opening,
 * look-alikes folded to Latin, are mostly English ones (`isEnglish`): then it is English in
 * disguise. One pass over the words, each looked up once: linear in the text's length, and
 * cheap beside the policy's own reading of the text, which it follows.
 */
export function stopWordDetector(isEnglish: (word: string) => boolean): LanguageDetector {
  return {
    detect(text) {
      let lower = text.toLowerCase();
      if (BEYOND_LATIN.test(lower)) {
        // Fullwidth letters and zero-width joins read as the policy reads them.
        lower = withoutFormat(lower.normalize('NFKC'));
        if (otherScript(lower)) {
          // Its opening is enough to tell, and bounds the cost of folding a long text twice.
          const words = new Set(
            fold(text.slice(0, 2_000))
              .split(/[^\p{L}]+/u)
              .filter(Boolean),
          );
          let english = 0;
          for (const w of words) if (w.length >= 2 && isEnglish(w)) english++;
          return english * 2 >= words.size ? undefined : 'und';
        }
      }
      // Only English's function words (or none): English, without counting.
      if (!scanFunctionWords(lower, undefined)) return undefined;
      // Only the function words are kept, to count each once.
      const words = new Set<string>();
      scanFunctionWords(lower, words);
      const hits = new Map<string, number>();
      for (const word of words) {
        const languages = LANGUAGES_OF.get(word);
        if (!languages) continue;
        for (const l of languages) hits.set(l, (hits.get(l) ?? 0) + (PARTICLES.has(word) ? 0.5 : 1));
      }
      const english = hits.get('en') ?? 0;
      hits.delete('en');
      // Ties (Spanish and Portuguese share many words) go to the first by name: not English either way.
      const [best] = [...hits].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
      if (best === undefined || best[1] < MIN_HITS || best[1] <= 2 * english) return undefined;
      return best[0];
    },
  };
}
