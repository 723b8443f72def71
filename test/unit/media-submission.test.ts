/**
 * The media submission's provider hooks that used to be asked by the route (the
 * upstream's refusals of a prepared request, the worker lane) and the speech
 * voices: answered by the model's own provider through the scenario layer
 * (server/domain/media-request.ts, server/domain/scenario-provider.ts), the
 * ordinary answers where it has no hook.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { withScenarioLayer } from '../../server/domain/scenario-provider.ts';
import { providerVoices, submissionProvider } from '../../server/domain/media-request.ts';
import { scenarioOf } from '../../server/domain/scenarios.ts';
import type { ImageJobRequest, MediaProvider, MediaSubmission } from '../../server/providers/media-types.ts';

const submission = (model: string, prompt = 'a cat'): MediaSubmission => ({ model, kind: 'image', scenarios: scenarioOf(prompt, true) });
const request = { prompt: 'a cat', background: 'transparent' } as unknown as ImageJobRequest;

/** A local generator: no hooks, the local lane. */
const local: MediaProvider<'image'> = { name: 'local', resume: 'rerun', generate: async () => ({ bytes: Buffer.from('x'), mimeType: 'image/png' }) };

/** An upstream's provider: its own lane, a refusal, and the voices it is mapped for. */
const upstream: MediaProvider = {
  ...(local as MediaProvider),
  name: 'upstream',
  lane: 'remote',
  requestProblem: (model, req) => ((req as { background?: string }).background === 'transparent' ? `${model} makes no transparent background.` : undefined),
  voices: () => ['alloy', 'echo'],
};

describe('media submission: the provider hooks the route no longer asks', () => {
  const set = withScenarioLayer({ image: local, byModel: { 'up-image': upstream } });

  it('when the model has an upstream provider, then its refusal and its remote lane come through the scenario layer', () => {
    const p = submissionProvider(set, submission('up-image'));
    assert.equal(p.requestProblem(request), 'up-image makes no transparent background.');
    assert.equal(p.requestProblem({ prompt: 'a cat' } as unknown as ImageJobRequest), undefined);
    assert.equal(p.lane(), 'remote');
  });

  it('when a scenario card rides on the submission, then the upstream still answers its own refusal and lane', () => {
    const p = submissionProvider(set, submission('up-image', 'a cat [[scenario:partial]]'));
    assert.deepEqual([p.requestProblem(request), p.lane(), p.slots(1)], ['up-image makes no transparent background.', 'remote', 2]);
  });

  it('when the model runs on the kind’s local generator, or on none, then nothing is refused and the lane is local', () => {
    for (const p of [submissionProvider(set, submission('gemforge-image-1')), submissionProvider({}, submission('nowhere'))]) {
      assert.deepEqual([p.requestProblem(request), p.lane()], [undefined, 'local']);
    }
  });

  it('when a speech model’s voices are asked, then its provider’s voices come through the layer; a local one is not restricted', () => {
    const speech = withScenarioLayer({ byModel: { 'up-speech': upstream } });
    assert.deepEqual(providerVoices(speech, 'up-speech'), ['alloy', 'echo']);
    assert.equal(providerVoices(speech, 'gemforge-speech-1'), undefined);
  });
});
