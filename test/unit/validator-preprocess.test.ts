/**
 * server/http/validator-routes.ts has express-openapi-validator preprocess a
 * contract the build checked without compiling: component schemas are looked
 * up in its Ajv rather than compiled for their `.schema`, and the validators of a
 * discriminator's branches are compiled at their first call. The contract that
 * comes out must be the library's own, and those validators must answer as the
 * library's do; the build still compiles everything once (checkContractAtBuild).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { readYamlFile } from '../../server/yaml-file.ts';
import { preprocessWithoutCompiling, validatorsSchemaPreprocessor } from '../../server/http/validator-routes.ts';
import { STRICT_FORMATS } from '../../server/http/formats.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const fromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
const refParser = fromValidator('@apidevtools/json-schema-ref-parser') as { bundle(doc: unknown): Promise<unknown> };
const { AjvOptions } = fromValidator('./framework/ajv/options.js') as { AjvOptions: new (options: unknown) => { preprocessor: unknown } };

type Validate = ((data: unknown) => boolean) & { errors?: unknown };
interface Discriminator {
  options: unknown;
  property: string;
  validators: Record<string, Validate>;
}
type Doc = { components: { schemas: Record<string, { _discriminator?: Discriminator }> } };
type Preprocessed = { ajv: { schemas: Record<string, { validate?: unknown }> } };

/** The contract as the validator bundles it, preprocessed by the class as it is installed now. */
async function preprocessed(): Promise<{ doc: Doc; preprocessor: Preprocessed }> {
  const doc = (await refParser.bundle(readYamlFile(path.join(ROOT, 'openapi/openapi.yaml')))) as Doc;
  const options = new AjvOptions({ serDes: [], validateFormats: true, ajvFormats: { mode: 'fast' }, formats: STRICT_FORMATS }).preprocessor;
  const Preprocessor = validatorsSchemaPreprocessor();
  const preprocessor = new Preprocessor(doc, options, false);
  preprocessor.preProcess();
  return { doc, preprocessor: preprocessor as unknown as Preprocessed };
}

const BODIES: unknown[] = [
  {},
  { model: 'gemforge-speech-1', operation: 'speech', prompt: 'Hello there.', parameters: { voiceProfileId: 'voice_1' } },
  { model: 'gemforge-speech-1', operation: 'voice_clone', prompt: 'Hello there.', parameters: { voiceProfileId: 'voice_1', extra: true } },
  { model: 'gemforge-music-1', operation: 'music', prompt: 'a calm piano', parameters: { durationSeconds: 30 } },
  { model: 'gemforge-music-1', operation: 'music', prompt: 7, unknown: 'field' },
];

describe('the validator preprocessing a contract without compiling', () => {
  it('when the contract is preprocessed without compiling, then it comes out as the library makes it, its discriminator validators answer alike, and no component schema was compiled', async () => {
    const library = await preprocessed();
    preprocessWithoutCompiling();
    const fast = await preprocessed();
    assert.deepStrictEqual(fast.doc, library.doc);
    const compiled = (p: Preprocessed) => Object.values(p.ajv.schemas).filter((env) => typeof env === 'object' && env.validate).length;
    assert.ok(compiled(library.preprocessor) > 10, 'the library compiles component schemas while preprocessing');
    assert.equal(compiled(fast.preprocessor), 0, 'none compiled without compiling');
    const discriminators = (doc: Doc) => Object.entries(doc.components.schemas).filter(([, s]) => s._discriminator);
    const [fastOnes, libraryOnes] = [discriminators(fast.doc), discriminators(library.doc)];
    assert.ok(libraryOnes.length > 0, 'the contract has a discriminator (the audio envelope)');
    assert.deepEqual(
      fastOnes.map(([name]) => name),
      libraryOnes.map(([name]) => name),
    );
    for (const [i, [name, schema]] of fastOnes.entries()) {
      const mine = schema._discriminator!;
      const theirs = libraryOnes[i]![1]._discriminator!;
      assert.deepStrictEqual([mine.options, mine.property, Object.keys(mine.validators)], [theirs.options, theirs.property, Object.keys(theirs.validators)]);
      for (const option of Object.keys(theirs.validators)) {
        for (const body of BODIES) {
          const expected = theirs.validators[option]!(structuredClone(body));
          const got = mine.validators[option]!(structuredClone(body));
          assert.equal(got, expected, `${name} ${option}: ${JSON.stringify(body)}`);
          assert.deepStrictEqual(mine.validators[option]!.errors, theirs.validators[option]!.errors, `${name} ${option}: errors of ${JSON.stringify(body)}`);
        }
      }
    }
  });
});
