/**
 * Scenario triggers as a provider layer, so every provider plays the same test cards: one wrapper per
 * provider family, composed around every provider at the composition root
 * (server.ts; local or remote alike), plays the `[[scenario:…]]` test cards
 * (docs/api.md, "Scenario triggers"). The use cases only parse the markers out
 * of a prompt and hand them to their provider with the request; neither they nor
 * the worker branch on a marker.
 *
 * Media (`withScenarios`), through the provider's submission hooks and its jobs:
 * - `provider-unavailable`: `admit` refuses (503 before anything is claimed);
 * - `references-processing`: `referencePending` names the first reference;
 * - `uncertain`: `dispatchOutcome` is `lost` (claimed and reserved, no task);
 * - `partial`: `slots` adds a second take to a single output, and every output
 *   but the first fails;
 * - `fail`: every output fails; `cancel`: the task ends `cancelled`;
 * - `processing:N` / `unresumable:N`: the first output waits N seconds (at most
 *   an hour; it ends early when the worker stops), then the provider runs;
 * - `unresumable`: the job declares resume policy `never` (a crash holds it).
 *
 * Text (`withTextScenarios`): `provider-unavailable` refuses at `admit`;
 * `stream-error[:N]` / `uncertain[:N]` let N deltas (default 4) through, then
 * fail the stream (usage measured so far / outcome unknown).
 *
 * Analysis (`withAnalysisScenarios`): `provider-unavailable` refuses at `admit`;
 * `uncertain` fails with an unknown outcome; `processing:N` delays the analysis
 * N seconds (at most 60); `analysis-failed` keeps the billed usage and breaks the
 * answer, as a model's malformed output would.
 *
 * A failing card never reaches the provider underneath; the markers themselves
 * never do (prompts are stripped by the use cases). Every hook the layer does not
 * decide is passed on to the provider it wraps.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { EXTRACT_SCENARIOS, findScenario, MEDIA_SCENARIOS, TEXT_SCENARIOS, type Scenario } from './scenarios.ts';
import { chatPromptTokens, countTokens } from '../tokens.ts';
import {
  MediaCancelledError,
  MediaGenerationError,
  type GeneratedOutput,
  type JobRequests,
  type MediaJob,
  type MediaKind,
  type MediaProvider,
  type MediaProviders,
  type MediaTools,
} from '../providers/media-types.ts';
import { ProviderError, usageOf, type TextEvent, type TextGenerationRequest, type TextProvider, type TextProviders } from '../providers/text/types.ts';
import { AnalysisError, type AnalysisProvider } from '../providers/analysis/types.ts';

type Markers = ReadonlyArray<Scenario> | undefined;

/** Deltas a text card lets through before it fails the stream (overridable: `[[scenario:stream-error:N]]`). */
const SCENARIO_DELTAS = 4;

/** The pre-flight of every family: `provider-unavailable` refuses, else the wrapped provider decides. */
function admits(scenarios: Markers, inner: (() => boolean | undefined) | undefined): boolean {
  return !findScenario(scenarios ?? [], TEXT_SCENARIOS.providerUnavailable) && (inner?.() ?? true);
}

/** Waits `seconds` in short slices; false when the worker stopped meanwhile. */
async function wait(tools: MediaTools, seconds: number): Promise<boolean> {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (tools.stopping()) return false;
    await delay(Math.min(100, until - Date.now()));
  }
  return true;
}

/** A media provider with the scenario layer around it: its submission hooks and its jobs. */
export function withScenarios<K extends MediaKind>(provider: MediaProvider<K>): MediaProvider<K> {
  return {
    name: provider.name,
    resume: provider.resume,
    ...(provider.lane && { lane: provider.lane }),
    admit: (submission) => admits(submission.scenarios, provider.admit && (() => provider.admit!(submission))),
    ...(provider.unavailableFor && { unavailableFor: () => provider.unavailableFor!() }),
    referencePending(submission, assetIds) {
      if (findScenario(submission.scenarios, MEDIA_SCENARIOS.referencesProcessing)) return assetIds[0];
      return provider.referencePending?.(submission, assetIds);
    },
    slots(submission, outputCount) {
      // An alternate take that fails, so a single output can end `partial`.
      if (outputCount === 1 && findScenario(submission.scenarios, MEDIA_SCENARIOS.partial)) return 2;
      return provider.slots?.(submission, outputCount) ?? outputCount;
    },
    dispatchOutcome(submission) {
      if (findScenario(submission.scenarios, MEDIA_SCENARIOS.uncertain)) return 'lost';
      return provider.dispatchOutcome?.(submission) ?? 'known';
    },
    // The provider's own answers about its upstream, passed on as they are (no scenario changes them).
    ...(provider.requestProblem && { requestProblem: (model: string, request: JobRequests[K]) => provider.requestProblem!(model, request) }),
    ...(provider.voices && { voices: (model: string) => provider.voices!(model) }),
    ...(provider.capabilities && { capabilities: (model: string, listed: Record<string, unknown>) => provider.capabilities!(model, listed) }),
    resumeFor(job) {
      return findScenario(job.scenarios, MEDIA_SCENARIOS.unresumable) ? 'never' : (provider.resumeFor?.(job) ?? provider.resume);
    },
    async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
      const s = job.scenarios;
      const slow = findScenario(s, MEDIA_SCENARIOS.processing) ?? findScenario(s, MEDIA_SCENARIOS.unresumable);
      if (slow && job.index === 0 && !(await wait(tools, Math.min(Number(slow.args[0] ?? 5) || 5, 3600)))) {
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

/** Lets `deltas` deltas through, then fails the stream the way the card asks. */
async function* failPartWay(events: AsyncIterable<TextEvent>, card: Scenario, request: TextGenerationRequest): AsyncGenerator<TextEvent> {
  const deltas = Number(card.args[0]) || SCENARIO_DELTAS;
  let text = '';
  let seen = 0;
  for await (const event of events) {
    if (event.type !== 'delta') break;
    yield event;
    text += event.content;
    if (++seen >= deltas) break;
  }
  if (card.name === TEXT_SCENARIOS.streamError) {
    const usage = usageOf(chatPromptTokens(request.messages), countTokens(text));
    throw new ProviderError('failed', 'The text provider failed part-way (scenario stream-error).', { usage });
  }
  throw new ProviderError('uncertain', 'The outcome of this generation is unknown (scenario uncertain).');
}

/** A text provider with the scenario layer around it. */
export function withTextScenario(provider: TextProvider): TextProvider {
  return {
    name: provider.name,
    promptTokenUpperBound: (messages) => provider.promptTokenUpperBound(messages),
    admit: (request) => admits(request.scenarios, provider.admit && (() => provider.admit!(request))),
    ...(provider.unavailableFor && { unavailableFor: () => provider.unavailableFor!() }),
    generate(request) {
      const s = request.scenarios ?? [];
      const card = findScenario(s, TEXT_SCENARIOS.streamError) ?? findScenario(s, TEXT_SCENARIOS.uncertain);
      const events = provider.generate(request);
      return card ? failPartWay(events, card, request) : events;
    },
  };
}

/** Every text provider the resolver hands out, wrapped (each once). */
export function withTextScenarios(providers: TextProviders): TextProviders {
  const wrapped = new WeakMap<TextProvider, TextProvider>();
  return (id) => {
    const { provider, model } = providers(id);
    let layered = wrapped.get(provider);
    if (!layered) wrapped.set(provider, (layered = withTextScenario(provider)));
    return { provider: layered, model };
  };
}

/** The analysis provider with the scenario layer around it. */
export function withAnalysisScenarios(provider: AnalysisProvider): AnalysisProvider {
  return {
    name: provider.name,
    admit: (request) => admits(request.scenarios, provider.admit && (() => provider.admit!(request))),
    async analyze(request) {
      const s = request.scenarios ?? [];
      if (findScenario(s, EXTRACT_SCENARIOS.uncertain)) throw new AnalysisError('uncertain', 'The outcome of this analysis is unknown (scenario uncertain).');
      const slow = findScenario(s, EXTRACT_SCENARIOS.processing);
      if (slow) await delay(Math.min(Number(slow.args[0]) || 5, 60) * 1000);
      const result = await provider.analyze(request);
      if (!findScenario(s, EXTRACT_SCENARIOS.analysisFailed)) return result;
      return { ...result, output: result.output.slice(0, Math.floor(result.output.length / 2)) };
    },
  };
}
