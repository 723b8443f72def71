/**
 * The embedded moderation provider: the categories of the policy file, matched
 * against the text as normalize.ts reads it. A category's terms match as whole
 * words; its patterns match the normalised words separated by single spaces;
 * its intents match the structure of a harmful request (intents.ts).
 */
import { setImmediate } from 'node:timers/promises';
import type { ModerationCategory, ModerationPolicy } from './policy-file.ts';
import { inDictionary, tokenize, type Token } from './normalize.ts';
import { stopWordDetector, type LanguageDetector } from './language.ts';
import { carries, maskedWords, occurrences, type Occurrence } from './intents.ts';
import { gloss } from './gloss.ts';
import { maskNamedObjects, NAMED_OBJECT, THING } from './context.ts';
import { secondReading } from './confusables.ts';
import type { ContentPreference, ModerationProvider, ModerationVerdict } from './types.ts';

/** Characters read between two turns of the event loop (one prompt's worth at most). */
const YIELD_AFTER_CHARS = 30_000;

/**
 * Whether the term's words occur together, none of them inside a benign mask: "build a bomb
 * shelter" holds no "build a bomb", since its bomb is a shelter's; "build a bomb for the
 * shelter" does (the mask is only the words side by side).
 */
function holdsTerm(tokens: Token[], stems: string[], masked: boolean[]): boolean {
  outer: for (let i = 0; i + stems.length <= tokens.length; i++) {
    for (let k = 0; k < stems.length; k++) if (tokens[i + k]!.stem !== stems[k] || masked[i + k]) continue outer;
    return true;
  }
  return false;
}

/** The ids of the categories that apply to `preference` and that `text` breaks. */
export function categoriesOf(policy: ModerationPolicy, text: string, preference: ContentPreference): string[] {
  const tokens = tokenize(text, policy.vocabulary);
  const spaced = tokens.map((t) => t.word).join(' ');
  const masked = maskedWords(tokens, policy.phrases);
  let found = occurrences(tokens, policy.phrases, masked);
  // Words a named object makes harmless ("bomb shelter", "the container won't die") count for nothing.
  if (maskNamedObjects(tokens, found.get(NAMED_OBJECT), masked, found.get(THING))) found = occurrences(tokens, policy.phrases, masked);
  const ids: string[] = [];
  for (const c of policy.categories) {
    if (!policy.applies(c, preference)) continue;
    if (breaks(c, tokens, spaced, found, masked)) ids.push(c.id);
  }
  return ids;
}

function breaks(c: ModerationCategory, tokens: Token[], spaced: string, found: Map<string, Occurrence[]>, masked: boolean[]): boolean {
  for (const t of c.terms) if (holdsTerm(tokens, t.stems, masked)) return true;
  for (const p of c.patterns) if (p.test(spaced)) return true;
  for (const intent of c.intents) if (carries(tokens, found, intent)) return true;
  return false;
}

/**
 * The embedded provider. Its concepts are English: a text that `languages` reads as another
 * language and that breaks nothing is returned as unjudged (policies.md, "Other languages").
 */
export function embeddedModeration(policy: ModerationPolicy, languages: LanguageDetector = stopWordDetector(inDictionary)): ModerationProvider {
  return {
    name: 'embedded',
    async moderate({ texts, preference }) {
      let since = 0;
      let unjudged: ModerationVerdict['unjudged'];
      for (const { field, text } of texts) {
        // A conversation holds up to 128,000 characters: other requests get a turn between
        // its messages instead of waiting for the whole of it.
        if (since >= YIELD_AFTER_CHARS) {
          await setImmediate();
          since = 0;
        }
        since += text.length;
        const categories = categoriesOf(policy, text, preference);
        if (categories.length > 0) return { provider: 'embedded', flagged: { field, categories } };
        // A look-alike with two readings ("smуggling"): the second is judged too.
        const second = secondReading(text);
        const reread = second === undefined ? [] : categoriesOf(policy, second, preference);
        if (reread.length > 0) return { provider: 'embedded', flagged: { field, categories: reread } };
        const language = languages.detect(text);
        // Another language is read through its glossary: what that finds is refused; what it
        // does not stays unjudged, since a word-for-word reading is no judgment of the whole.
        const english = gloss(text, language, (w) => policy.vocabulary.knows(w) || inDictionary(w));
        const glossed = english === undefined ? [] : categoriesOf(policy, english, preference);
        if (glossed.length > 0) return { provider: 'embedded', flagged: { field, categories: glossed } };
        if (unjudged === undefined && language !== undefined) unjudged = { field, language };
      }
      return { provider: 'embedded', flagged: undefined, unjudged };
    },
  };
}
