/**
 * Which request fields moderation reads, from the contract, so a new text field cannot slip past moderation:
 * a request schema property marked `x-moderated: true` holds user text that
 * moderation screens. The marks are read once at start into, per operation, the
 * paths of its moderated strings (`prompt`, `parameters.negativePrompt`,
 * `messages[*].content` …), so a free-text field added to the contract with the
 * mark is moderated without touching this code, and one added without it is a
 * visible decision in the contract.
 */
import type { ModerationText } from '../../providers/moderation/types.ts';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** A path into a body: member names, `*` for every item of an array. */
export type FieldPath = readonly string[];

/** The schema a `$ref` (and its 3.1 siblings) stands for. */
function resolve(doc: Json, node: unknown, depth = 0): unknown {
  if (!isObject(node) || typeof node.$ref !== 'string' || depth > 32) return node;
  let target: unknown = doc;
  for (const part of node.$ref.replace(/^#\//, '').split('/')) target = isObject(target) ? target[part.replaceAll('~1', '/').replaceAll('~0', '~')] : undefined;
  const { $ref: _ref, ...siblings } = node;
  return resolve(doc, isObject(target) ? { ...target, ...siblings } : target, depth + 1);
}

/** Every moderated path below `schema` (through properties, items and allOf/anyOf/oneOf/then/else). */
function pathsIn(doc: Json, schema: unknown, at: string[], out: Map<string, FieldPath>, depth = 0): void {
  const s = resolve(doc, schema);
  if (!isObject(s) || depth > 24) return;
  if (s['x-moderated'] === true && at.length > 0) out.set(at.join('.'), at);
  if (isObject(s.properties)) for (const [name, sub] of Object.entries(s.properties)) pathsIn(doc, sub, [...at, name], out, depth + 1);
  if (s.items !== undefined) pathsIn(doc, s.items, [...at, '*'], out, depth + 1);
  for (const key of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(s[key])) for (const sub of s[key] as unknown[]) pathsIn(doc, sub, at, out, depth + 1);
  for (const key of ['then', 'else']) if (s[key] !== undefined) pathsIn(doc, s[key], at, out, depth + 1);
}

/** Per operationId, the moderated paths of its JSON request body. */
export function moderatedFields(doc: Json): Map<string, FieldPath[]> {
  const table = new Map<string, FieldPath[]>();
  for (const item of Object.values(isObject(doc.paths) ? doc.paths : {})) {
    if (!isObject(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op) || typeof op.operationId !== 'string') continue;
      const body = resolve(doc, op.requestBody);
      const schema =
        isObject(body) && isObject(body.content) && isObject(body.content['application/json']) ? body.content['application/json'].schema : undefined;
      const found = new Map<string, FieldPath>();
      pathsIn(doc, schema, [], found);
      if (found.size > 0) table.set(op.operationId, [...found.values()]);
    }
  }
  return table;
}

/** The non-empty strings at `path` in `value`, named as moderation records them (`messages[0].content`). */
function collect(value: unknown, path: FieldPath, name: string, out: ModerationText[]): void {
  if (path.length === 0) {
    if (typeof value === 'string' && value !== '') out.push({ field: name, text: value });
    return;
  }
  const [head, ...rest] = path;
  if (head === '*') {
    if (Array.isArray(value)) value.forEach((item, i) => collect(item, rest, `${name}[${i}]`, out));
  } else if (isObject(value) && Object.hasOwn(value, head)) {
    collect(value[head], rest, name === '' ? head : `${name}.${head}`, out);
  }
}

/** A function giving the texts to moderate in a validated body, for the operations of `doc`. */
export function textsFrom(doc: Json): (operationId: string | undefined, body: unknown) => ModerationText[] {
  const table = moderatedFields(doc);
  return (operationId, body) => {
    const paths = operationId === undefined ? undefined : table.get(operationId);
    if (!paths || !isObject(body)) return [];
    const out: ModerationText[] = [];
    for (const path of paths) collect(body, path, '', out);
    return out;
  };
}
