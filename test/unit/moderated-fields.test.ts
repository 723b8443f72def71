/**
 * Moderated fields come from the contract: the request
 * properties marked `x-moderated` are what moderation reads, per operation.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { moderatedFields, textsFrom } from '../../server/domain/policy/moderated-fields.ts';

const root = path.resolve(import.meta.dirname, '../..');
const contract = () => YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8')) as Record<string, any>;
const asNames = (table: Map<string, readonly (readonly string[])[]>) =>
  Object.fromEntries([...table].map(([op, paths]) => [op, paths.map((p) => p.join('.'))]));

describe('moderated fields from the contract', () => {
  it('when the contract is read, then the moderated fields are the user texts of each operation (as they were when kept by hand)', () => {
    assert.deepEqual(asNames(moderatedFields(contract())), {
      createImage: ['prompt', 'parameters.negativePrompt', 'parameters.style'],
      createVideo: ['prompt'],
      createAudio: ['prompt', 'parameters.style', 'parameters.title', 'parameters.negativeTags'],
      createChatCompletion: ['messages.*.content'],
      extractVideo: ['prompt'],
    });
  });

  it('when a body is read, then each non-empty moderated string is named as moderation records it', () => {
    const texts = textsFrom(contract());
    assert.deepEqual(
      texts('createChatCompletion', {
        model: 'm',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: '' },
          { role: 'user', content: 'hi' },
        ],
      }),
      [
        { field: 'messages[0].content', text: 'Be brief.' },
        { field: 'messages[2].content', text: 'hi' },
      ],
    );
    assert.deepEqual(texts('createImage', { model: 'm', prompt: 'a fox', parameters: { negativePrompt: 'blur', ratio: '1:1' } }), [
      { field: 'prompt', text: 'a fox' },
      { field: 'parameters.negativePrompt', text: 'blur' },
    ]);
    assert.deepEqual(texts('listModels', {}), []);
    assert.deepEqual(texts(undefined, { prompt: 'x' }), []);
  });

  it('when a designer marks a new request field x-moderated, then it is moderated with no code change', () => {
    const doc = contract();
    doc.components.schemas.ExtractionRequest.properties.notes = { type: 'string', maxLength: 100, 'x-moderated': true };
    assert.deepEqual(asNames(moderatedFields(doc)).extractVideo, ['prompt', 'notes']);
    assert.deepEqual(textsFrom(doc)('extractVideo', { model: 'm', videoAssetId: 'a', notes: 'watch this' }), [{ field: 'notes', text: 'watch this' }]);
  });
});
