/**
 * The labelled moderation sets of test/fixtures/moderation/ and how a
 * moderation provider does on them: recall per harmful category, the
 * false-positive rate on benign text, and every miss. Shared by
 * `npm run eval:moderation` and the test that holds the targets.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { ModerationProvider } from '../../server/providers/moderation/types.ts';

export const SETS_DIR = path.join(import.meta.dirname, '../../test/fixtures/moderation');
/** Sets written without sight of the policy and not yet tuned on: measured, never held to the targets. */
export const UNSEEN_DIR = path.join(SETS_DIR, 'unseen');

export interface Sample {
  text: string;
  harmful: boolean;
  /** The harmful category, or the kind of benign text (hard-negative, everyday). */
  group: string;
}

export interface LabelledSet {
  name: string;
  samples: Sample[];
}

/** Reads one set file (`harmful:` and `benign:`, each a map of group → list of texts). */
export function readSet(file: string): LabelledSet {
  const doc = YAML.parse(fs.readFileSync(file, 'utf8')) as { harmful?: Record<string, string[]>; benign?: Record<string, string[]> };
  const samples: Sample[] = [];
  for (const [harmful, groups] of [
    [true, doc.harmful],
    [false, doc.benign],
  ] as const) {
    for (const [group, texts] of Object.entries(groups ?? {})) for (const text of texts ?? []) samples.push({ text: String(text), harmful, group });
  }
  return { name: path.basename(file, '.yaml'), samples };
}

export function readSets(dir = SETS_DIR): LabelledSet[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => readSet(path.join(dir, f)));
}

export interface GroupScore {
  group: string;
  total: number;
  refused: number;
}

export interface Score {
  set: string;
  harmful: GroupScore[];
  benign: GroupScore[];
  recall: number;
  falsePositiveRate: number;
  /** Harmful texts let through. */
  misses: Sample[];
  /** Benign texts refused, with the categories given. */
  falsePositives: Array<Sample & { categories: string[] }>;
}

/** Runs every sample of the set through the provider (as an image prompt of a standard account), `concurrency` at a time. */
export async function score(set: LabelledSet, provider: ModerationProvider, concurrency = 1): Promise<Score> {
  const verdicts: string[][] = new Array(set.samples.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < set.samples.length) {
        const i = next++;
        const verdict = await provider.moderate({ texts: [{ field: 'prompt', text: set.samples[i]!.text }], preference: 'standard' });
        verdicts[i] = verdict.flagged?.categories ?? [];
      }
    }),
  );
  const groups = (harmful: boolean): GroupScore[] => {
    const byGroup = new Map<string, GroupScore>();
    set.samples.forEach((s, i) => {
      if (s.harmful !== harmful) return;
      const g = byGroup.get(s.group) ?? { group: s.group, total: 0, refused: 0 };
      g.total++;
      if (verdicts[i]!.length > 0) g.refused++;
      byGroup.set(s.group, g);
    });
    return [...byGroup.values()];
  };
  const harmful = groups(true);
  const benign = groups(false);
  const sum = (gs: GroupScore[], key: 'total' | 'refused') => gs.reduce((n, g) => n + g[key], 0);
  return {
    set: set.name,
    harmful,
    benign,
    recall: sum(harmful, 'refused') / Math.max(1, sum(harmful, 'total')),
    falsePositiveRate: sum(benign, 'refused') / Math.max(1, sum(benign, 'total')),
    misses: set.samples.filter((s, i) => s.harmful && verdicts[i]!.length === 0),
    falsePositives: set.samples.flatMap((s, i) => (!s.harmful && verdicts[i]!.length > 0 ? [{ ...s, categories: verdicts[i]! }] : [])),
  };
}

/** The targets of the embedded policy: catch nearly all harmful text, refuse almost no harmless text. */
export const TARGETS = { recall: 0.95, falsePositiveRate: 0.01 };
