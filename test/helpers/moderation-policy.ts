/**
 * The shipped moderation policy and assertions over its verdicts, for the unit
 * tests of its rules: what a text is refused as (standard preference), that it
 * passes, that it is refused (as a given category).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { loadModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import { categoriesOf } from '../../server/providers/moderation/local.ts';

export const shippedPolicy = loadModerationPolicy(path.join(import.meta.dirname, '../../server/catalog/moderation.yaml'));

/** The categories the shipped policy refuses `text` for, for a standard account. */
export const refused = (text: string): string[] => categoriesOf(shippedPolicy, text, 'standard');

export const passes = (text: string): void => assert.deepEqual(refused(text), [], text);

export const isRefused = (text: string): void => assert.notDeepEqual(refused(text), [], text);

export const refusedAs = (text: string, category: string): void => {
  const categories = refused(text);
  assert.ok(categories.includes(category), `${text}: ${categories.join(', ') || 'passed'}`);
};
