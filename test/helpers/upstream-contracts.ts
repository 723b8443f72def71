/**
 * The providers' own published API descriptions, held against what the fakes
 * receive and answer: every request an adapter sends is validated against the
 * provider's document (test/fixtures/upstream-contracts/, the part gemforge
 * calls, with its source, commit and licence in `x-trimmed-from`), and every
 * JSON answer a fake gives must be one of the shapes the document gives. A
 * request the real API would refuse is answered as the API answers a bad
 * request and recorded as a violation, which fails the test when the fake
 * closes; an answer the document does not describe is a bug in the fake.
 *
 * Two normalisations, so the validator really checks: OpenAI's document says
 * 3.1 but marks optional fields with 3.0's `nullable: true`, which JSON Schema
 * ignores (read: the value may also be null); Replicate's prediction `version`
 * is a `oneOf` of "any string" and "hidden", which "hidden" matches twice
 * (read as `anyOf`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export type ContractName = 'openai' | 'replicate' | 'fal';

const DIR = path.resolve(import.meta.dirname, '../fixtures/upstream-contracts');

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** `nullable: true` as JSON Schema says it; `oneOf` read as `anyOf` where named. */
function normalise(node: Json, parentKey?: string): Json {
  if (Array.isArray(node)) return node.map((n) => normalise(n));
  if (node === null || typeof node !== 'object') return node;
  const out: { [key: string]: Json } = {};
  for (const [k, v] of Object.entries(node)) out[k] = parentKey === 'properties' ? normalise(v) : normalise(v, k);
  if (parentKey === 'properties') return out;
  if (out.nullable === true) {
    delete out.nullable;
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (!out.type) return { anyOf: [out, { type: 'null' }] };
  }
  if (
    Array.isArray(out.oneOf) &&
    out.oneOf.some((b) => typeof b === 'object' && b !== null && !Array.isArray(b) && Array.isArray(b.enum) && b.enum.includes('hidden'))
  ) {
    out.anyOf = out.oneOf;
    delete out.oneOf;
  }
  return out;
}

interface Operation {
  method: string;
  /** The document's path template, e.g. /predictions/{prediction_id}. */
  template: RegExp;
  request?: { type: string; validate: ValidateFunction };
  responses: Map<string, ValidateFunction>;
}

function ajvFor(coerce: boolean): Ajv2020 {
  // strict off: the documents carry OpenAPI's own keywords (discriminator, x-…).
  const ajv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: coerce ? 'array' : false });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  ajv.addFormat('binary', true);
  ajv.addFormat('unixtime', true);
  return ajv;
}

const loaded = new Map<ContractName, Operation[]>();

/** The operations of a contract, compiled once per process. */
function operationsOf(name: ContractName): Operation[] {
  const cached = loaded.get(name);
  if (cached) return cached;
  const doc = normalise(JSON.parse(fs.readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as Json) as {
    paths: Record<
      string,
      Record<string, { requestBody?: { content: Record<string, { schema: Json }> }; responses: Record<string, { content?: Record<string, { schema: Json }> }> }>
    >;
  };
  const plain = ajvFor(false);
  const coercing = ajvFor(true); // multipart fields arrive as text
  plain.addSchema(doc, name);
  coercing.addSchema(doc, name);
  const pointer = (p: string) => `${name}#/paths/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`;
  const ops: Operation[] = [];
  for (const [p, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const template = new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      const content = op.requestBody?.content ?? {};
      const type = Object.keys(content)[0];
      const request = type
        ? {
            type,
            validate: (type.startsWith('multipart/') ? coercing : plain).compile({
              $ref: `${pointer(p)}/${method}/requestBody/content/${type.replace(/\//g, '~1')}/schema`,
            }),
          }
        : undefined;
      const responses = new Map<string, ValidateFunction>();
      for (const [status, response] of Object.entries(op.responses)) {
        if (response.content?.['application/json'])
          responses.set(status, plain.compile({ $ref: `${pointer(p)}/${method}/responses/${status}/content/application~1json/schema` }));
      }
      ops.push({ method: method.toUpperCase(), template, ...(request && { request }), responses });
    }
  }
  loaded.set(name, ops);
  return ops;
}

/** The document's operation for a request the fake received (its `/v1` prefix is the document's server URL). */
function operation(name: ContractName, method: string, urlPath: string): Operation | undefined {
  const p = urlPath.replace(/^\/v1(?=\/)/, '');
  return operationsOf(name).find((o) => o.method === method && o.template.test(p));
}

function explain(validate: ValidateFunction): string {
  return (validate.errors ?? [])
    .map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params && 'allowedValues' in e.params ? ` (${String(e.params.allowedValues)})` : ''}`)
    .join('; ');
}

/** A multipart body as the object its schema describes: fields as given, files by name (`image[]` → image, a list). */
export function formObject(form: { fields: Record<string, string>; files: Array<{ name: string }> }): Record<string, unknown> {
  const out: Record<string, unknown> = { ...form.fields };
  for (const file of form.files) {
    const key = file.name.replace(/\[\]$/, '');
    if (file.name.endsWith('[]')) out[key] = [...((out[key] as unknown[]) ?? []), 'file'];
    else out[key] = 'file';
  }
  return out;
}

/**
 * Why the provider's document refuses this request, or undefined when it takes
 * it. `body` is the parsed JSON, or the multipart body as `formObject` gives it.
 * A route the document does not have is refused too.
 */
export function requestViolation(name: ContractName, method: string, urlPath: string, body: unknown): string | undefined {
  const op = operation(name, method, urlPath);
  if (!op) return `${method} ${urlPath} is not an operation of the ${name} document`;
  if (!op.request) return undefined;
  const copy = structuredClone(body);
  if (op.request.validate(copy)) return undefined;
  return `${method} ${urlPath}: ${explain(op.request.validate)}`;
}

/** Why the document does not describe this JSON answer (a documented operation's answer), or undefined. */
export function responseViolation(
  name: ContractName,
  method: string,
  urlPath: string,
  status: number,
  json: unknown,
  errorSchema?: (status: number) => string | undefined,
): string | undefined {
  const op = operation(name, method, urlPath);
  if (!op) return undefined;
  const schema = status >= 400 ? errorSchema?.(status) : undefined;
  const validate = op.responses.get(String(status)) ?? (schema ? componentValidator(name, schema) : undefined);
  if (!validate) return undefined;
  return validate(structuredClone(json)) ? undefined : `${method} ${urlPath} answered ${status}: ${explain(validate)}`;
}

/**
 * Why the document's named component schema does not describe `json`, or
 * undefined: for what an operation's JSON answer does not cover, such as each
 * chunk of a streamed answer (OpenAI's CreateChatCompletionStreamResponse).
 */
export function schemaViolation(name: ContractName, schema: string, json: unknown): string | undefined {
  const validate = componentValidator(name, schema);
  return validate(structuredClone(json)) ? undefined : `${schema}: ${explain(validate)}`;
}

const componentValidators = new Map<string, ValidateFunction>();

/** A validator of one of the document's component schemas (OpenAI's ErrorResponse, a stream chunk). */
function componentValidator(name: ContractName, schema: string): ValidateFunction {
  const key = `${name} ${schema}`;
  const known = componentValidators.get(key);
  if (known) return known;
  const ajv = ajvFor(false);
  ajv.addSchema(normalise(JSON.parse(fs.readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as Json) as never, name);
  const validate = ajv.compile({ $ref: `${name}#/components/schemas/${schema}` });
  componentValidators.set(key, validate);
  return validate;
}
