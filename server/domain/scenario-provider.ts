/**
 * Media scenario triggers as a provider layer (issue 26, item 5): one wrapper,
 * composed around every media provider at the composition root (local or
 * remote alike), plays the `[[scenario:…]]` test cards a task carries
 * (docs/api.md, "Scenario triggers"), so the worker never branches on them:
 *
 * - `processing:N` / `unresumable:N`: the first output waits N seconds (at most
 *   an hour; it ends early when the worker stops), then the provider runs;
 * - `unresumable`: the job declares resume policy `never` (a crash holds it);
 * - `cancel`: the task ends `cancelled` (MediaCancelledError);
 * - `fail`: every output fails; `partial`: every output but the first fails.
 *
 * Markers that act at submission (`uncertain`, `provider-unavailable`,
 * `references-processing`, the extra slot of `partial`) stay with the use case.
 */
import { MEDIA_SCENARIOS } from './media-request.ts';
import { findScenario } from './scenarios.ts';
import {
  MediaCancelledError,
  MediaGenerationError,
  type GeneratedOutput,
  type MediaJob,
  type MediaKind,
  type MediaProvider,
  type MediaProviders,
  type MediaTools,
} from '../providers/media-types.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits `seconds` in short slices; false when the worker stopped meanwhile. */
async function wait(tools: MediaTools, seconds: number): Promise<boolean> {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (tools.stopping()) return false;
    await sleep(Math.min(100, until - Date.now()));
  }
  return true;
}

export function withScenarios<K extends MediaKind>(provider: MediaProvider<K>): MediaProvider<K> {
  return {
    name: provider.name,
    resume: provider.resume,
    ...(provider.lane && { lane: provider.lane }),
    resumeFor(job) {
      return findScenario(job.scenarios, MEDIA_SCENARIOS.unresumable) ? 'never' : (provider.resumeFor?.(job) ?? provider.resume);
    },
    async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
      const s = job.scenarios;
      const delay = findScenario(s, MEDIA_SCENARIOS.processing) ?? findScenario(s, MEDIA_SCENARIOS.unresumable);
      if (delay && job.index === 0 && !(await wait(tools, Math.min(Number(delay.args[0] ?? 5) || 5, 3600)))) {
        throw new MediaGenerationError('GENERATION_FAILED', 'interrupted: the worker is stopping');
      }
      if (findScenario(s, MEDIA_SCENARIOS.cancel)) throw new MediaCancelledError('The task was cancelled before it produced any output; nothing was charged.');
      if (findScenario(s, MEDIA_SCENARIOS.fail)) throw new MediaGenerationError('GENERATION_FAILED', 'The generation failed; nothing was charged.');
      if (findScenario(s, MEDIA_SCENARIOS.partial) && job.index > 0) throw new MediaGenerationError('GENERATION_FAILED', 'This output could not be generated.');
      return provider.generate(job, tools);
    },
  };
}

/** Every provider of the set, wrapped (by kind and by model). */
export function withScenarioLayer(providers: MediaProviders): MediaProviders {
  const out: MediaProviders = {};
  if (providers.image) out.image = withScenarios(providers.image);
  if (providers.video) out.video = withScenarios(providers.video);
  if (providers.audio) out.audio = withScenarios(providers.audio);
  if (providers.byModel) out.byModel = Object.fromEntries(Object.entries(providers.byModel).map(([id, p]) => [id, withScenarios(p)]));
  return out;
}
