/**
 * The scenario layer on its own (server/domain/scenario-provider.ts): each
 * family's wrapper plays its test cards over whatever provider it wraps, and
 * passes every other answer on to that provider.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { withAnalysisScenarios, withScenarioLayer, withScenarios, withTextScenario, withTextScenarios } from '../../server/domain/scenario-provider.ts';
import { slotsFor, submissionProvider } from '../../server/domain/media-request.ts';
import { scenarioOf } from '../../server/domain/scenarios.ts';
import { chatPromptTokens, countTokens } from '../../server/tokens.ts';
import type { MediaProvider, MediaSubmission } from '../../server/providers/media-types.ts';
import { ProviderError, type TextEvent, type TextGenerationRequest, type TextProvider } from '../../server/providers/text/types.ts';
import { AnalysisError, type AnalysisProvider, type AnalysisRequest } from '../../server/providers/analysis/types.ts';

const cards = (prompt: string, enabled = true) => scenarioOf(prompt, enabled);
const submission = (prompt: string, enabled = true): MediaSubmission => ({ model: 'gemforge-image-1', kind: 'image', scenarios: cards(prompt, enabled) });

/** A media provider with no submission hooks (as the local generators are). */
const plainMedia: MediaProvider<'image'> = {
  name: 'plain',
  resume: 'rerun',
  generate: async () => ({ bytes: Buffer.from('x'), mimeType: 'image/png' }),
};

/** A media provider answering every submission hook itself (a remote one with a circuit breaker, say). */
const hookedMedia: MediaProvider<'image'> = {
  ...plainMedia,
  name: 'hooked',
  admit: () => false,
  referencePending: (_s, ids) => ids.at(-1),
  slots: (_s, n) => n + 5,
  dispatchOutcome: () => 'lost',
};

describe('scenario layer: media submission hooks', () => {
  it('when a submission carries no card, then the ordinary answers come back around a provider without hooks', () => {
    const p = withScenarios(plainMedia);
    const s = submission('a cat');
    assert.equal(p.admit!(s), true);
    assert.equal(p.referencePending!(s, ['a', 'b']), undefined);
    assert.equal(p.slots!(s, 1), 1);
    assert.equal(p.dispatchOutcome!(s), 'known');
  });

  it('when a submission carries no card, then the wrapped provider answers its own hooks', () => {
    const p = withScenarios(hookedMedia);
    const s = submission('a cat');
    assert.equal(p.admit!(s), false, 'a circuit breaker underneath still refuses');
    assert.equal(p.referencePending!(s, ['a', 'b']), 'b');
    assert.equal(p.slots!(s, 2), 7);
    assert.equal(p.dispatchOutcome!(s), 'lost');
  });

  it('when a submission carries the submission cards, then the layer answers them whatever the provider underneath would', () => {
    const p = withScenarios({ ...hookedMedia, admit: () => true, referencePending: () => undefined, slots: (_s, n) => n, dispatchOutcome: () => 'known' });
    assert.equal(p.admit!(submission('busy [[scenario:provider-unavailable]]')), false);
    assert.equal(p.referencePending!(submission('[[scenario:references-processing]]'), ['first', 'second']), 'first');
    assert.equal(p.slots!(submission('[[scenario:partial]]'), 1), 2, 'a single output gets a second, failing take');
    assert.equal(p.slots!(submission('[[scenario:partial]]'), 3), 3, 'several outputs keep their count');
    assert.equal(p.dispatchOutcome!(submission('[[scenario:uncertain]]')), 'lost');
  });

  it('when scenarios are disabled, then no marker is parsed and the layer answers as the provider does', () => {
    const p = withScenarios(plainMedia);
    const s = submission('[[scenario:provider-unavailable]] [[scenario:uncertain]] [[scenario:partial]]', false);
    assert.deepEqual([p.admit!(s), p.slots!(s, 1), p.dispatchOutcome!(s)], [true, 1, 'known']);
  });

  it('when a submission asks the layered set, then the model’s own provider answers, else its kind’s, else the ordinary answers', () => {
    const set = withScenarioLayer({ image: plainMedia, byModel: { 'gemforge-image-1': hookedMedia } });
    assert.equal(submissionProvider(set, submission('x')).admit(), false, 'the model’s remote provider');
    assert.equal(submissionProvider(set, { ...submission('x'), model: 'gemforge-image-2' }).admit(), true, 'the kind’s provider');
    const none = submissionProvider(set, { ...submission('[[scenario:uncertain]]'), kind: 'video', model: 'v' });
    assert.deepEqual([none.admit(), none.slots(1), none.dispatchOutcome(), none.referencePending(['a'])], [true, 1, 'known', undefined]);
    const layered = submissionProvider(set, { ...submission('[[scenario:partial]]'), model: 'gemforge-image-2' });
    assert.deepEqual(slotsFor({ provider: layered }, 5, 1), [3, 2], 'the quote split over the two slots, the first taking the remainder');
    assert.deepEqual(slotsFor({}, 7, 3), [3, 2, 2]);
  });
});

/** A text provider that streams `words` as deltas, then finishes. */
function streaming(words: string[], admit?: boolean): TextProvider {
  return {
    name: 'stub',
    promptTokenUpperBound: () => 10,
    ...(admit !== undefined && { admit: () => admit }),
    async *generate() {
      for (const w of words) yield { type: 'delta', content: w };
      yield { type: 'finish', finish_reason: 'stop', usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
    },
  };
}

const textRequest = (content: string): TextGenerationRequest => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 10,
  scenarios: cards(content),
});

/** The events of a stream, and the error it ended with. */
async function drain(events: AsyncIterable<TextEvent>): Promise<{ events: TextEvent[]; error?: ProviderError }> {
  const seen: TextEvent[] = [];
  try {
    for await (const e of events) seen.push(e);
  } catch (error) {
    return { events: seen, error: error as ProviderError };
  }
  return { events: seen };
}

describe('scenario layer: text', () => {
  const words = ['one ', 'two ', 'three ', 'four ', 'five '];

  it('when no card is played, then the provider’s stream passes through and its own admit decides', async () => {
    const p = withTextScenario(streaming(words));
    const { events, error } = await drain(p.generate(textRequest('plain')));
    assert.equal(error, undefined);
    assert.equal(events.length, words.length + 1);
    assert.equal(p.admit!(textRequest('plain')), true);
    assert.equal(withTextScenario(streaming(words, false)).admit!(textRequest('plain')), false, 'a circuit breaker underneath still refuses');
  });

  it('when the request carries [[scenario:provider-unavailable]], then admit refuses', () => {
    assert.equal(withTextScenario(streaming(words, true)).admit!(textRequest('[[scenario:provider-unavailable]]')), false);
  });

  it('when the request carries [[scenario:stream-error:2]], then two deltas pass and the stream fails with the usage measured so far', async () => {
    const request = textRequest('[[scenario:stream-error:2]]');
    const { events, error } = await drain(withTextScenario(streaming(words)).generate(request));
    assert.deepEqual(
      events.map((e) => (e.type === 'delta' ? e.content : e.type)),
      ['one ', 'two '],
    );
    assert.ok(error instanceof ProviderError);
    assert.equal(error.failure, 'failed');
    assert.deepEqual(error.usage, {
      prompt_tokens: chatPromptTokens(request.messages),
      completion_tokens: countTokens('one two '),
      total_tokens: chatPromptTokens(request.messages) + countTokens('one two '),
    });
  });

  it('when the request carries [[scenario:uncertain]], then four deltas pass and the outcome is unknown', async () => {
    const { events, error } = await drain(withTextScenario(streaming(words)).generate(textRequest('[[scenario:uncertain]]')));
    assert.equal(events.length, 4);
    assert.equal(error?.failure, 'uncertain');
  });

  it('when the resolver hands out the same provider twice, then it is wrapped once and the model name is kept', () => {
    const inner = streaming(words);
    const providers = withTextScenarios((id) => ({ provider: inner, model: `upstream-${id}` }));
    const a = providers('m1');
    assert.equal(a.provider, providers('m2').provider);
    assert.notEqual(a.provider, inner);
    assert.equal(a.model, 'upstream-m1');
  });
});

/** An analysis provider that counts its calls. */
function analyzer(admit?: boolean): AnalysisProvider & { calls: number } {
  return {
    name: 'stub',
    calls: 0,
    ...(admit !== undefined && { admit: () => admit }),
    async analyze() {
      this.calls++;
      return { output: '{"analysis":"fine"}', usage: { inputTokens: 3, outputTokens: 4 } };
    },
  };
}

const analysisRequest = (prompt: string): AnalysisRequest => ({
  model: 'gemforge-analysis-1',
  prompt: '',
  scenarios: cards(prompt),
  video: { file: '/nowhere', mimeType: 'video/mp4', sizeBytes: 1, durationSeconds: 1, width: null, height: null, hasAudio: false },
});

describe('scenario layer: analysis', () => {
  it('when no card is played, then the provider answers and its own admit decides', async () => {
    const inner = analyzer();
    const p = withAnalysisScenarios(inner);
    assert.deepEqual(await p.analyze(analysisRequest('plain')), { output: '{"analysis":"fine"}', usage: { inputTokens: 3, outputTokens: 4 } });
    assert.equal(p.admit!(analysisRequest('plain')), true);
    assert.equal(withAnalysisScenarios(analyzer(false)).admit!(analysisRequest('plain')), false);
    assert.equal(withAnalysisScenarios(analyzer(true)).admit!(analysisRequest('[[scenario:provider-unavailable]]')), false);
  });

  it('when the request carries [[scenario:uncertain]], then the analysis fails with an unknown outcome and never reaches the provider', async () => {
    const inner = analyzer();
    await assert.rejects(
      withAnalysisScenarios(inner).analyze(analysisRequest('[[scenario:uncertain]]')),
      (e: unknown) => e instanceof AnalysisError && e.failure === 'uncertain',
    );
    assert.equal(inner.calls, 0);
  });

  it('when the request carries [[scenario:analysis-failed]], then the provider’s usage is kept and its answer broken', async () => {
    const result = await withAnalysisScenarios(analyzer()).analyze(analysisRequest('[[scenario:analysis-failed]]'));
    assert.deepEqual(result, { output: '{"analysi', usage: { inputTokens: 3, outputTokens: 4 } });
  });
});
