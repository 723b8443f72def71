/**
 * The contract's check against the OpenAPI schema, made by the build instead of
 * at every start (server/http/validator-routes.ts): a text the build checked is
 * known by its hash and the validator's version, any other text (edited, broken,
 * elsewhere) is checked at start as before, and the validator then compiles the
 * OpenAPI schema only when it is asked to check. The build also notes whether
 * the validator's bundling gives the contract back unchanged: such a contract
 * is then loaded without being bundled again at start.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { PARSED_YAML_DIR, parsedYamlName } from '../../server/yaml-file.ts';
import {
  asBundled,
  checkContractAtBuild,
  contractBundledByBuild,
  contractCheckedByBuild,
  skipIdleBundling,
  skipUnusedSchemaValidator,
} from '../../server/http/validator-routes.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-contract-check-'));
const contract = fs.readFileSync(path.join(ROOT, 'openapi/openapi.yaml'), 'utf8');
const fromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));

/** The validator's framework (what loads a contract) and its ref parser's module, whose `bundle` the framework calls through it. */
const { OpenAPIFramework } = fromValidator('./framework/index.js') as {
  OpenAPIFramework: new (args: { apiDoc: unknown; validateApiSpec: boolean }) => { initialize(visitor: object): Promise<{ apiDoc: unknown }> };
};
const refParser = fromValidator('@apidevtools/json-schema-ref-parser') as { bundle: (...args: unknown[]) => Promise<unknown> };

/** The contract the framework loads from `doc`, and how many times it bundled one. */
async function loaded(doc: object): Promise<{ apiDoc: unknown; bundled: number }> {
  const bundle = refParser.bundle;
  let bundled = 0;
  refParser.bundle = (...args) => {
    bundled++;
    return bundle.apply(refParser, args);
  };
  try {
    const { apiDoc } = await new OpenAPIFramework({ apiDoc: doc, validateApiSpec: false }).initialize({});
    return { apiDoc, bundled };
  } finally {
    refParser.bundle = bundle;
  }
}

describe('the contract checked by the build', () => {
  const planted: string[] = [];
  after(() => {
    for (const f of planted) fs.rmSync(f, { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  /** A copy of the contract with a unique description, so its hash is this test's own. */
  type Contract = { openapi: string; info: { description: string }; paths: Record<string, { get: { responses: unknown } }> };
  const variant = (edit: (doc: Contract) => void = () => undefined) => {
    const doc = YAML.parse(contract) as Contract;
    doc.info.description = `${doc.info.description} ${crypto.randomUUID()}`;
    edit(doc);
    const text = YAML.stringify(doc);
    const file = path.join(dir, `${crypto.randomUUID()}.yaml`);
    fs.writeFileSync(file, text);
    fs.mkdirSync(PARSED_YAML_DIR, { recursive: true });
    planted.push(path.join(PARSED_YAML_DIR, `${parsedYamlName(text)}.checked`));
    return { doc, text, file };
  };

  it('when the build checks a valid contract, then that text counts as checked, and the same contract edited does not', async () => {
    const { doc, text, file } = variant();
    assert.equal(contractCheckedByBuild(file), false, 'not before the build checked it');
    assert.equal(await checkContractAtBuild(text, doc), true);
    assert.equal(contractCheckedByBuild(file), true);
    fs.appendFileSync(file, '# edited after the build\n');
    assert.equal(contractCheckedByBuild(file), false);
  });

  it('when the build checks a contract the OpenAPI schema refuses, then it is not noted (the start checks it, and refuses it)', async () => {
    const { doc, text, file } = variant((d) => (d.paths['/api/generate/models'].get.responses = 'broken'));
    assert.equal(await checkContractAtBuild(text, doc), false);
    assert.equal(contractCheckedByBuild(file), false);
  });

  it('when the note was made by another version of the validator, then the contract does not count as checked', async () => {
    const { doc, text, file } = variant();
    await checkContractAtBuild(text, doc);
    fs.writeFileSync(path.join(PARSED_YAML_DIR, `${parsedYamlName(text)}.checked`), '0.0.1');
    assert.equal(contractCheckedByBuild(file), false);
  });

  it('when the build finds that bundling leaves the contract as it is, then it notes so, and the validator loads that very contract without bundling it', async () => {
    const { doc, text, file } = variant();
    assert.deepStrictEqual(await refParser.bundle(structuredClone(doc)), doc, 'bundling our contract changes nothing');
    assert.equal(contractBundledByBuild(file), false, 'not before the build checked it');
    assert.equal(await checkContractAtBuild(text, doc), true);
    assert.equal(contractBundledByBuild(file), true);
    skipUnusedSchemaValidator();
    skipIdleBundling();
    const marked = asBundled(structuredClone(doc));
    const fast = await loaded(marked);
    assert.equal(fast.apiDoc, marked, 'the object given is the contract loaded');
    assert.equal(fast.bundled, 0);
    const library = await loaded(structuredClone(doc));
    assert.equal(library.bundled, 1, 'an unmarked contract is bundled by the library');
    assert.deepStrictEqual(fast.apiDoc, library.apiDoc);
  });

  it('when bundling would change the contract (a ref to a ref), or an older build noted only the check, then it counts as checked but is bundled at start', async () => {
    type WithAliases = Contract & { components: { schemas: Record<string, unknown> } };
    const { doc, text, file } = variant((d) => {
      const schemas = (d as WithAliases).components.schemas;
      const target = Object.keys(schemas)[0]!;
      schemas.AliasForTheTest = { $ref: `#/components/schemas/${target}` };
      schemas.UsesTheAlias = { type: 'object', properties: { a: { $ref: '#/components/schemas/AliasForTheTest' } } };
    });
    assert.notDeepStrictEqual(await refParser.bundle(structuredClone(doc)), doc, 'bundling rewrites the ref to a ref');
    assert.equal(await checkContractAtBuild(text, doc), true);
    assert.equal(contractCheckedByBuild(file), true);
    assert.equal(contractBundledByBuild(file), false);
    const older = variant();
    await checkContractAtBuild(older.text, older.doc);
    const mark = path.join(PARSED_YAML_DIR, `${parsedYamlName(older.text)}.checked`);
    fs.writeFileSync(mark, fs.readFileSync(mark, 'utf8').replace(', bundling changes nothing', ''));
    assert.equal(contractCheckedByBuild(older.file), true);
    assert.equal(contractBundledByBuild(older.file), false);
  });

  it("when the validator is not asked to check the contract, then its OpenAPI-schema validator is not built; when asked, it is the library's", () => {
    skipUnusedSchemaValidator();
    const { OpenAPISchemaValidator } = fromValidator('./framework/openapi.schema.validator.js') as {
      OpenAPISchemaValidator: new (o: { version: string; validateApiSpec: boolean }) => { validate(doc: unknown): { errors: unknown[] } };
    };
    const unused = new OpenAPISchemaValidator({ version: '3.1.0', validateApiSpec: false });
    assert.throws(() => unused.validate({}), /checked by the build/);
    const full = new OpenAPISchemaValidator({ version: '3.1.0', validateApiSpec: true });
    assert.ok(full.validate({ openapi: '3.1.0' }).errors.length > 0, 'a contract with no info is refused');
    assert.deepEqual(full.validate(YAML.parse(contract)).errors, []);
  });
});
