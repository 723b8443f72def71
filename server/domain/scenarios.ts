/**
 * Scenario triggers: prompt markers, like test card numbers, that drive the
 * reference server into a contract state on purpose and deterministically
 * (STYLE, "what no anchor does"). A marker is `[[scenario:NAME]]` or
 * `[[scenario:NAME:ARG:ARG…]]`, e.g. `[[scenario:stream-error]]` or
 * `[[scenario:processing:5]]`. Configuration `SCENARIOS_ENABLED=false` turns
 * them all off: markers are then ordinary text.
 *
 * The use cases only parse markers out of a prompt and hand them to their
 * provider; the scenario layer composed around every provider at the composition
 * root (scenario-provider.ts) plays them. Each workflow honours its own names
 * (`MEDIA_SCENARIOS`, `TEXT_SCENARIOS`, `EXTRACT_SCENARIOS`). Unknown names are
 * ignored, so a new marker never breaks an old workflow.
 */

/** One marker found in a prompt: its name and its `:`-separated arguments. */
export interface Scenario {
  name: string;
  args: string[];
}

// Names are lowercase words with dashes; arguments are anything but `]` and `:`.
const MARKER = /\[\[scenario:([a-z0-9][a-z0-9-]{0,63})((?::[^\]:\s]{1,64}){0,8})\]\]/g;

/** Text scenarios. The media workflows add their own names beside these. */
export const TEXT_SCENARIOS = {
  /** The stream fails part-way: some chunks, then an error frame (non-stream: 502); measured usage is billed. */
  streamError: 'stream-error',
  /** The outcome is left uncertain: reservation held, every replay 409 REQUEST_UNCERTAIN. */
  uncertain: 'uncertain',
  /** 503 PROVIDER_UNAVAILABLE before anything is claimed: the same identity may be retried. */
  providerUnavailable: 'provider-unavailable',
} as const;

/** Media scenario markers (docs/api.md, "Scenario triggers"). */
export const MEDIA_SCENARIOS = {
  fail: 'fail',
  partial: 'partial',
  processing: 'processing',
  cancel: 'cancel',
  uncertain: TEXT_SCENARIOS.uncertain,
  providerUnavailable: TEXT_SCENARIOS.providerUnavailable,
  referencesProcessing: 'references-processing',
  unresumable: 'unresumable',
} as const;

/** Extraction scenarios, beside `uncertain` and `provider-unavailable` as text has them. */
export const EXTRACT_SCENARIOS = {
  /** The analyzer "returns" malformed output: its usage is billed and the answer is 409 ANALYSIS_FAILED, retained for replay. */
  analysisFailed: 'analysis-failed',
  /** `processing:N`: the analysis takes N seconds longer (at most 60), to exercise client time-outs and crashes. */
  processing: 'processing',
  uncertain: TEXT_SCENARIOS.uncertain,
  providerUnavailable: TEXT_SCENARIOS.providerUnavailable,
} as const;

/** Every marker in `text`, in order of appearance; none when scenarios are disabled. */
export function scenarioOf(text: string, enabled: boolean): Scenario[] {
  if (!enabled) return [];
  const found: Scenario[] = [];
  for (const match of text.matchAll(MARKER)) {
    const args = match[2] ? match[2].slice(1).split(':') : [];
    found.push({ name: match[1], args });
  }
  return found;
}

/** The first marker with this name, if any. */
export function findScenario(scenarios: readonly Scenario[], name: string): Scenario | undefined {
  return scenarios.find((s) => s.name === name);
}

/** `text` without its markers (what a provider sees), when scenarios are enabled. */
export function stripScenarios(text: string, enabled: boolean): string {
  if (!enabled) return text;
  return text
    .replace(MARKER, '')
    .replace(/[ \t]{2,}/g, ' ')
    .trim();
}
