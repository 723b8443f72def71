/**
 * The contract's schemas as validators (Ajv, JSON Schema 2020-12 as OpenAPI 3.1
 * uses it): any schema object of openapi/openapi.yaml, with its `$ref`s into
 * `#/components/...` resolved against the contract.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

export const CONTRACT_PATH = path.resolve(import.meta.dirname, '../../openapi/openapi.yaml');

/** A parsed YAML or JSON value: read freely, as the tests do. */
export type Json = any;

export function loadContract(): Json {
  return YAML.parse(fs.readFileSync(CONTRACT_PATH, 'utf8'));
}

/** Compiles schema objects of `contract` (OpenAPI keywords such as `example` are ignored). */
export function schemaValidator(contract: Json): (schema: Json) => ValidateFunction {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  ajv.addFormat('binary', true);
  let n = 0;
  const cache = new Map<Json, ValidateFunction>();
  return (schema) => {
    let fn = cache.get(schema);
    if (!fn) {
      fn = ajv.compile({ $id: `urn:gemforge:schema:${n++}`, components: contract.components, allOf: [schema] });
      cache.set(schema, fn);
    }
    return fn;
  };
}

/** `ref` (`#/components/...`) resolved in the contract. */
export function resolveRef(contract: Json, node: Json): Json {
  let out = node;
  while (out && typeof out.$ref === 'string' && out.$ref.startsWith('#/')) {
    out = out.$ref
      .slice(2)
      .split('/')
      .reduce((o: Json, k: string) => o?.[k.replaceAll('~1', '/').replaceAll('~0', '~')], contract);
  }
  return out;
}

/** An assertion that `value` is valid against a schema object, with the first errors in the message. */
export function assertValidIn(validatorFor: (schema: Json) => ValidateFunction): (schema: Json, value: Json, where: string) => void {
  return (schema, value, where) => {
    const validate = validatorFor(schema);
    assert.ok(validate(value), `${where}: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  };
}

/** The JSON of each `data:` frame of an SSE text, and whether it ended with [DONE]. */
export function sseFrames(text: string): { frames: Json[]; done: boolean } {
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));
  return { frames: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d)), done: data.at(-1) === '[DONE]' };
}

/** Keys and kinds (null, string, number, …) of a JSON value, values left out. */
export function shapeOf(value: Json): Json {
  if (Array.isArray(value)) return value.map(shapeOf);
  if (value === null) return null;
  if (typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shapeOf(v)]));
  return typeof value;
}

/** The schema of a chat completion stream's data frames. */
export const STREAM_DATA = { $ref: '#/components/schemas/ChatCompletionStreamData' };
