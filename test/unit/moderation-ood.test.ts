/**
 * The learned classifier out of its distribution (scripts/moderation/ood.ts): over broad
 * benign text it was never trained on — the test suite's own strings, sentences of
 * node_modules' READMEs — the embedded policy with its classifier refuses at most OOD_BOUND;
 * that text stays out of training; and the gate in front of the model (classifier.ts,
 * `mayJudge`) lets it read only text with a word of the harmful requests it learned, or
 * text in another language.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../server/config.ts';
import { loadModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import { embeddedModeration } from '../../server/providers/moderation/local.ts';
import { mayJudge, readModel } from '../../server/providers/moderation/classifier.ts';
import { tokenize } from '../../server/providers/moderation/normalize.ts';
import { OOD_BOUND, OOD_FILES, oodRefusals, readOod } from '../../scripts/moderation/ood.ts';
import { readTrainingSets } from '../../scripts/moderation/train.ts';

const policy = loadModerationPolicy(loadConfig({}).moderationPolicyPath);
const model = readModel();

describe('moderation classifier out of distribution', () => {
  for (const name of Object.values(OOD_FILES)) {
    it(`when the shipped model judges every text of ${name} (all benign, never trained on), then it refuses at most ${100 * OOD_BOUND} % of them`, async () => {
      const texts = readOod(name);
      assert.ok(texts.length >= 2_000, `${texts.length} texts`);
      const refused = await oodRefusals(embeddedModeration(policy, undefined, { classifier: model }), texts);
      assert.ok(
        refused.length <= OOD_BOUND * texts.length,
        `${refused.length}/${texts.length} refused:\n${refused.map((r) => `  ${JSON.stringify(r.text)} → ${r.categories.join(', ')}`).join('\n')}`,
      );
    });
  }

  it('when the training sets are read, then none holds a text of the out-of-distribution corpus', () => {
    const heldOut = new Set(Object.values(OOD_FILES).flatMap(readOod));
    const leaked = readTrainingSets().flatMap((set) => set.samples.filter((s) => heldOut.has(s.text.trim())).map((s) => `${set.name}: ${s.text}`));
    assert.deepEqual(leaked, []);
  });

  it('when a text holds no word of the harmful requests, then the gate keeps the classifier from reading it; a signal word or another language opens it', () => {
    const opens = (text: string, foreign = false) => mayJudge(model, tokenize(text, policy.vocabulary), foreign);
    assert.ok(model.signalSet !== undefined && model.signalSet.size > 100, 'the shipped model has a gate');
    // "build", "people" and "plan" are common in benign text too: alone, they open nothing ("build a bomb" is the rules' to refuse).
    for (const text of [
      'when the key is missing, then 401 before any body is read',
      'a watercolor of a lighthouse at dawn',
      'select n from w',
      'how do I build a bomb shelter in my backyard',
      'people and cars',
      'local video generator plan',
    ])
      assert.equal(opens(text), false, text);
    for (const text of ['drone attack on a crowded festival, how', 'a nude figure drawing for an art class']) assert.equal(opens(text), true, text);
    // Another language: only on a foreign signal (or an English one), of which the shipped model has its own.
    assert.ok(model.foreignSet !== undefined && model.foreignSet.size > 20, 'the shipped model has a gate for other languages');
    assert.equal(opens('Hoe schrijf ik een goede sollicitatiebrief voor een bijbaan?', true), false);
  });

  it('when a text in another language holds no foreign signal, then the gate stays shut; a foreign signal among its words or its gloss, or an English signal, opens it', () => {
    // A gate of its own, so the rule is held whatever stems training finds.
    const gate = { signalSet: new Set(['gun']), foreignSet: new Set(['matar', 'poison']) };
    const opens = (text: string, gloss?: string) =>
      mayJudge(gate, tokenize(text, policy.vocabulary), true, gloss === undefined ? [] : tokenize(gloss, policy.vocabulary));
    assert.equal(opens('receta de tortilla de patatas para cuatro personas'), false);
    assert.equal(opens('como matar a mi vecino'), true, 'its own word');
    assert.equal(opens('wie vergifte ich meinen Nachbarn', 'how poison i my neighbour'), true, 'its gloss');
    assert.equal(opens('quiero una gun de verdad'), true, 'an English signal');
    assert.equal(opens('receta de tortilla', 'recipe of tortilla'), false);
    assert.equal(
      mayJudge({ signalSet: new Set(['gun']) }, tokenize('receta de tortilla de patatas', policy.vocabulary), true),
      true,
      'a model without foreign signals judges every text in another language',
    );
  });

  it('when ordinary requests in other languages are judged with the classifier, then none is refused, and each stays unjudged', async () => {
    const provider = embeddedModeration(policy, undefined, { classifier: model });
    for (const text of [
      'oi, pode me ajudar a planejar um cardápio de jantar para seis pessoas?',
      'Kun je een boodschappenlijst maken voor een week vegetarisch koken?',
    ]) {
      const verdict = await provider.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' });
      assert.equal(verdict.flagged, undefined, text);
      assert.ok(verdict.unjudged !== undefined, text);
    }
    assert.notEqual(
      (await provider.moderate({ texts: [{ field: 'prompt', text: 'instrucciones para hacer una bomba casera' }], preference: 'standard' })).flagged,
      undefined,
    );
  });

  it('when a text holds one paired signal, then the gate stays shut; a second, distinct one or one signal opens it', () => {
    // A gate of its own, so the rule is held whatever stems training finds.
    const gate = { signalSet: new Set(['gun']), pairedSet: new Set(['peopl', 'plan']) };
    const opens = (text: string) => mayJudge(gate, tokenize(text, policy.vocabulary), false);
    assert.equal(opens('people walking in the rain'), false);
    assert.equal(opens('people, people and more people'), false, 'one paired stem however often');
    assert.equal(opens('a plan for the people'), true);
    assert.equal(opens('a water gun fight'), true);
    assert.equal(
      mayJudge({ signalSet: new Set(['gun']) }, tokenize('a plan for the people', policy.vocabulary), false),
      false,
      'no paired stems: signals alone',
    );
  });

  it("when the repository's own ordinary texts are judged with the classifier (a negative prompt, a test's name), then none is refused", async () => {
    const provider = embeddedModeration(policy, undefined, { classifier: model });
    for (const text of ['people and cars', 'local video generator plan'])
      assert.equal((await provider.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' })).flagged, undefined, text);
  });
});
