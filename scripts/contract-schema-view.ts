/**
 * One schema as one flat object, for comparing two versions of a contract whose
 * schemas are written differently but mean the same: `$ref`s followed (their
 * siblings kept), `allOf` members merged into one set of constraints (the
 * tighter of two limits, the common enum values, every required name), a
 * discriminated `oneOf` reduced to the branch a tag value picks, and an `if`
 * decided where the tag values alone decide it. A speech body written as an
 * `allOf` of `if`/`then` on `operation` and one written as a `oneOf` of speech
 * and music bodies flatten, for `operation: speech`, to the same view.
 *
 * What cannot be decided from the tags stays as a conditional (`if`, `then`,
 * `else`) beside the view; a plain `oneOf`/`anyOf` (a nullable reference, say)
 * is kept as it is.
 */

export type Json = Record<string, unknown>;
export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A property → value map: the tag values a view is taken for (`{ operation: 'speech' }`). */
export type Tags = Record<string, unknown>;

export interface Conditional {
  if: unknown;
  then?: unknown;
  else?: unknown;
}

/** A flattened schema: its constraints, and its undecided conditionals. `false`: accepts nothing. */
export type View = Json & { conditionals: Conditional[] };

/** Upper bounds: lower is tighter. Lower bounds: higher is tighter. */
export const UPPER = ['maxLength', 'maximum', 'exclusiveMaximum', 'maxItems', 'maxProperties'];
export const LOWER = ['minLength', 'minimum', 'exclusiveMinimum', 'minItems', 'minProperties'];
const IGNORED = new Set([
  'description',
  'summary',
  'title',
  'example',
  'examples',
  'default',
  'externalDocs',
  'deprecated',
  'readOnly',
  'writeOnly',
  '$comment',
]);

/** Follows a local `$ref` (`#/…`) in `doc`; a `$ref` with siblings becomes the allOf of its target and them. */
export function resolver(doc: Json) {
  const target = (ref: string): unknown => {
    let node: unknown = doc;
    for (const part of ref.slice(2).split('/')) node = isObject(node) ? node[part.replaceAll('~1', '/').replaceAll('~0', '~')] : undefined;
    return node;
  };
  return (node: unknown): unknown => {
    if (!isObject(node) || typeof node.$ref !== 'string' || !node.$ref.startsWith('#/')) return node;
    const { $ref, ...siblings } = node;
    const found = target($ref);
    return Object.keys(siblings).length === 0 ? found : { allOf: [found, siblings] };
  };
}
export type Resolve = ReturnType<typeof resolver>;

/** Whether `schema` accepts `value` judging by const/enum alone: true, false, or undefined (it says more). */
function accepts(schema: unknown, value: unknown): boolean | undefined {
  if (schema === true) return true;
  if (!isObject(schema)) return schema === false ? false : undefined;
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) return false;
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) return false;
  return Object.keys(schema).every((k) => k === 'const' || k === 'enum' || k === 'type' || IGNORED.has(k)) ? true : undefined;
}

/** An `if` decided by the tags: true, false, or what is left to decide (the parts about other fields). */
function decide(condition: unknown, tags: Tags): boolean | Json {
  if (!isObject(condition)) return condition === false ? false : true;
  const rest: Json = {};
  for (const [key, rule] of Object.entries(condition)) {
    if (IGNORED.has(key)) continue;
    if (key === 'required' && Array.isArray(rule)) {
      const left = rule.filter((name) => !Object.hasOwn(tags, name as string));
      if (left.length > 0) rest.required = left;
    } else if (key === 'properties' && isObject(rule)) {
      const left: Json = {};
      for (const [name, sub] of Object.entries(rule)) {
        const verdict = Object.hasOwn(tags, name) ? accepts(sub, tags[name]) : undefined;
        if (verdict === false) return false;
        if (verdict === undefined) left[name] = sub;
      }
      if (Object.keys(left).length > 0) rest.properties = left;
    } else {
      rest[key] = rule;
    }
  }
  return Object.keys(rest).length === 0 ? true : rest;
}

const typeSet = (t: unknown): string[] | undefined => (t === undefined ? undefined : Array.isArray(t) ? (t as string[]) : [t as string]);

/** Adds `fragment`'s constraints to `view` (both flat): the allOf of the two. */
function merge(view: View, fragment: View): void {
  for (const [key, value] of Object.entries(fragment)) {
    if (key === 'conditionals') {
      view.conditionals.push(...(value as Conditional[]));
    } else if (view[key] === undefined) {
      view[key] = value;
    } else if (UPPER.includes(key)) {
      view[key] = Math.min(view[key] as number, value as number);
    } else if (LOWER.includes(key)) {
      view[key] = Math.max(view[key] as number, value as number);
    } else if (key === 'enum') {
      const keep = new Set((value as unknown[]).map((v) => JSON.stringify(v)));
      view.enum = (view.enum as unknown[]).filter((v) => keep.has(JSON.stringify(v)));
    } else if (key === 'type') {
      const keep = new Set(typeSet(value));
      view.type = typeSet(view.type)!.filter((t) => keep.has(t));
    } else if (key === 'required') {
      view.required = [...new Set([...(view.required as string[]), ...(value as string[])])];
    } else if (key === 'properties') {
      const props = { ...(view.properties as Json) };
      for (const [name, sub] of Object.entries(value as Json)) {
        props[name] = props[name] === undefined ? sub : props[name] === false || sub === false ? false : { allOf: [props[name], sub] };
      }
      view.properties = props;
    } else if (key === 'items') {
      view.items = { allOf: [view.items, value] };
    } else if (key === 'additionalProperties') {
      if (value === false || view.additionalProperties === false) view.additionalProperties = false;
    } else if (key === 'pattern' && value !== view.pattern) {
      view.pattern = `${view.pattern as string} and ${value as string}`;
    }
  }
}

/**
 * `schema` flattened for values carrying `tags`; false when it accepts no such
 * value (a branch refused, a tag value outside an enum, an `if` whose `else` is false).
 */
export function flatten(schema: unknown, resolve: Resolve, tags: Tags = {}, depth = 0): View | false {
  const s = resolve(schema);
  if (s === false) return false;
  const view: View = { conditionals: [] };
  if (!isObject(s) || depth > 32) return view;
  for (const [key, value] of Object.entries(s)) {
    if (IGNORED.has(key) || ['allOf', 'oneOf', 'anyOf', 'if', 'then', 'else', 'discriminator', '$ref'].includes(key)) continue;
    if (key.startsWith('x-') && key !== 'x-limits-enforced-since') continue;
    merge(view, { [key]: key === 'type' ? typeSet(value) : value, conditionals: [] });
  }
  const parts: unknown[] = [...((s.allOf as unknown[]) ?? [])];
  const tag = isObject(s.discriminator) ? (s.discriminator.propertyName as string) : undefined;
  const alternatives = (s.oneOf ?? s.anyOf) as unknown[] | undefined;
  if (Array.isArray(alternatives) && tag !== undefined && Object.hasOwn(tags, tag)) {
    const chosen = alternatives.find((branch) => {
      const b = flatten(branch, resolve, tags, depth + 1);
      return b !== false && accepts(flatten((b.properties as Json | undefined)?.[tag], resolve, {}, depth + 1), tags[tag]) !== false;
    });
    if (chosen === undefined) return false;
    parts.push(chosen);
  } else if (Array.isArray(alternatives)) {
    view[s.oneOf ? 'oneOf' : 'anyOf'] = alternatives;
  }
  if (s.if !== undefined) {
    const verdict = decide(s.if, tags);
    if (verdict === true && s.then !== undefined) parts.push(s.then);
    else if (verdict === false && s.else !== undefined) parts.push(s.else);
    else if (isObject(verdict)) view.conditionals.push({ if: verdict, then: s.then, else: s.else });
  }
  for (const part of parts) {
    const flat = flatten(part, resolve, tags, depth + 1);
    if (flat === false) return false;
    merge(view, flat);
  }
  const tagged = Object.entries(tags).filter(([name]) => isObject(view.properties) && Object.hasOwn(view.properties, name));
  for (const [name, value] of tagged) {
    if (accepts(flatten((view.properties as Json)[name], resolve, {}, depth + 1), value) === false) return false;
  }
  if (Array.isArray(view.enum) && view.enum.length === 0) return false;
  return view;
}

/**
 * The tags a request body is told apart by: the discriminator's property, or a
 * property an `if` tests with const/enum, in either version; each with every
 * value either version names. No tag: one untagged view.
 */
export function tagsOf(schemas: Array<[unknown, Resolve]>): Tags[] {
  let name: string | undefined;
  const values: unknown[] = [];
  const add = (v: unknown) => values.some((x) => JSON.stringify(x) === JSON.stringify(v)) || values.push(v);
  const conditions = (s: Json): unknown[] => [s.if, ...((s.allOf as unknown[]) ?? []).map((m) => (isObject(m) ? m.if : undefined))];
  for (const [schema, resolve] of schemas) {
    const s = resolve(schema);
    if (!isObject(s)) continue;
    if (isObject(s.discriminator)) {
      name ??= s.discriminator.propertyName as string;
      if (isObject(s.discriminator.mapping)) Object.keys(s.discriminator.mapping).forEach(add);
    }
    for (const c of conditions(s)) {
      if (!isObject(c) || !isObject(c.properties)) continue;
      for (const [prop, rule] of Object.entries(c.properties)) {
        if (isObject(rule) && (rule.const !== undefined || Array.isArray(rule.enum)) && name === undefined) name = prop;
      }
    }
  }
  if (name === undefined) return [{}];
  for (const [schema, resolve] of schemas) {
    const view = flatten(schema, resolve);
    const prop = view === false ? undefined : flatten((view.properties as Json | undefined)?.[name], resolve);
    if (prop && Array.isArray(prop.enum)) prop.enum.forEach(add);
    if (prop && prop.const !== undefined) add(prop.const);
  }
  return values.map((v) => ({ [name]: v }));
}
