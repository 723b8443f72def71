/**
 * The embedded moderation provider: the categories of the policy file, matched
 * against the text as normalize.ts reads it. A category's terms match as whole
 * words; its patterns match the normalised words separated by single spaces;
 * its intents match the structure of a harmful request (intents.ts).
 */
import { setImmediate } from 'node:timers/promises';
import type { ModerationCategory, ModerationPolicy } from './policy-file.ts';
import { tokenize, type Token } from './normalize.ts';
import { carries, occurrences, type Occurrence } from './intents.ts';
import type { ContentPreference, ModerationProvider } from './types.ts';

/** Characters read between two turns of the event loop (one prompt's worth at most). */
const YIELD_AFTER_CHARS = 30_000;

function holdsTerm(tokens: Token[], stems: string[]): boolean {
  outer: for (let i = 0; i + stems.length <= tokens.length; i++) {
    for (let k = 0; k < stems.length; k++) if (tokens[i + k]!.stem !== stems[k]) continue outer;
    return true;
  }
  return false;
}

/** The ids of the categories that apply to `preference` and that `text` breaks. */
export function categoriesOf(policy: ModerationPolicy, text: string, preference: ContentPreference): string[] {
  const tokens = tokenize(text, policy.vocabulary);
  const spaced = tokens.map((t) => t.word).join(' ');
  const found = occurrences(tokens, policy.phrases);
  const ids: string[] = [];
  for (const c of policy.categories) {
    if (!policy.applies(c, preference)) continue;
    if (breaks(c, tokens, spaced, found)) ids.push(c.id);
  }
  return ids;
}

function breaks(c: ModerationCategory, tokens: Token[], spaced: string, found: Map<string, Occurrence[]>): boolean {
  for (const t of c.terms) if (holdsTerm(tokens, t.stems)) return true;
  for (const p of c.patterns) if (p.test(spaced)) return true;
  for (const intent of c.intents) if (carries(tokens, found, intent)) return true;
  return false;
}

export function embeddedModeration(policy: ModerationPolicy): ModerationProvider {
  return {
    name: 'embedded',
    async moderate({ texts, preference }) {
      let since = 0;
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
      }
      return { provider: 'embedded', flagged: undefined };
    },
  };
}
