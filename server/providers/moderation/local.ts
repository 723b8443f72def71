/**
 * The embedded moderation provider: the categories of the policy file, matched
 * against normalised text (normalize.ts). A category's terms match as whole
 * words, whatever the case, accents, spacing, punctuation or leetspeak; its
 * patterns match the normalised words separated by single spaces.
 */
import type { ModerationPolicy } from './policy-file.ts';
import { contains, prepare } from './normalize.ts';
import type { ContentPreference, ModerationProvider } from './types.ts';

/** The ids of the categories that apply to `preference` and that `text` breaks. */
export function categoriesOf(policy: ModerationPolicy, text: string, preference: ContentPreference): string[] {
  const prepared = prepare(text);
  return policy.categories
    .filter((c) => policy.applies(c, preference))
    .filter((c) => c.terms.some((t) => contains(prepared, t.key)) || c.patterns.some((p) => p.test(prepared.spaced)))
    .map((c) => c.id);
}

export function embeddedModeration(policy: ModerationPolicy): ModerationProvider {
  return {
    name: 'embedded',
    async moderate({ texts, preference }) {
      for (const { field, text } of texts) {
        const categories = categoriesOf(policy, text, preference);
        if (categories.length > 0) return { provider: 'embedded', flagged: { field, categories } };
      }
      return { provider: 'embedded', flagged: undefined };
    },
  };
}
