/**
 * Request-validation issues said so that they name the problem:
 * express-openapi-validator reports an unknown field as "body.stream_options must
 * NOT have additional properties", which reads as if `stream_options` had an extra
 * member. Here it is "unknown field `stream_options`; this operation accepts model,
 * messages, …", with the accepted names read from the operation's schema; a
 * missing or malformed header says what it must be.
 */

/** A validator issue (the fields we read). */
export interface ValidatorIssue {
  path?: string;
  message?: string;
  errorCode?: string;
}

type Schema = Record<string, unknown>;

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Resolves a local `$ref` (`#/components/schemas/X`) in the contract. */
export type RefResolver = (ref: string) => unknown;

/** A resolver over a parsed contract document. */
export function refResolver(doc: unknown): RefResolver {
  return (ref) => {
    if (!ref.startsWith('#/')) return undefined;
    let node: unknown = doc;
    for (const part of ref.slice(2).split('/')) {
      const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
      node = isObject(node) && Object.hasOwn(node, key) ? node[key] : undefined;
    }
    return node;
  };
}

/**
 * Whether `value` satisfies an `if` schema, as far as its simple forms tell
 * (`required`, and members with `const` or `enum`, nested): true, false, or
 * undefined when it uses anything else.
 */
function satisfies(schema: unknown, value: unknown): boolean | undefined {
  if (!isObject(schema)) return undefined;
  let known = true;
  for (const [key, rule] of Object.entries(schema)) {
    if (key === 'description') continue;
    if (key === 'const') {
      if (value !== rule) return false;
    } else if (key === 'enum' && Array.isArray(rule)) {
      if (!rule.includes(value)) return false;
    } else if (key === 'required' && Array.isArray(rule)) {
      if (!isObject(value) || !rule.every((name) => typeof name === 'string' && Object.hasOwn(value, name))) return false;
    } else if (key === 'properties' && isObject(rule)) {
      if (!isObject(value)) continue; // properties constrain objects only
      for (const [name, sub] of Object.entries(rule)) {
        if (!Object.hasOwn(value, name)) continue;
        const verdict = satisfies(sub, value[name]);
        if (verdict === false) return false;
        if (verdict === undefined) known = false;
      }
    } else {
      known = false;
    }
  }
  return known ? true : undefined;
}

/**
 * Every schema that applies to `value` at one place: the schema, what it refers
 * to, its allOf/anyOf/oneOf branches and, of an if/then/else, the branch the
 * value takes (both when that cannot be told).
 */
function branches(schema: unknown, value: unknown, resolve: RefResolver, depth = 0): Schema[] {
  if (!isObject(schema) || depth > 16) return [];
  const out: Schema[] = [schema];
  if (typeof schema.$ref === 'string') out.push(...branches(resolve(schema.$ref), value, resolve, depth + 1));
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    const list = schema[key];
    if (!Array.isArray(list)) continue;
    const chosen = key === 'oneOf' ? taggedBranch(schema, list, value, resolve) : undefined;
    for (const s of chosen ? [chosen] : list) out.push(...branches(s, value, resolve, depth + 1));
  }
  if (schema.if !== undefined) {
    const verdict = satisfies(schema.if, value);
    if (verdict !== false && isObject(schema.then)) out.push(...branches(schema.then, value, resolve, depth + 1));
    if (verdict !== true && isObject(schema.else)) out.push(...branches(schema.else, value, resolve, depth + 1));
  }
  return out;
}

/** The discriminator's property of a `oneOf` told apart by one (OpenAPI `discriminator`), if any. */
function tagOf(schema: unknown, resolve: RefResolver): string | undefined {
  const s = isObject(schema) && typeof schema.$ref === 'string' ? resolve(schema.$ref) : schema;
  if (!isObject(s) || !Array.isArray(s.oneOf) || !isObject(s.discriminator)) return undefined;
  return typeof s.discriminator.propertyName === 'string' ? s.discriminator.propertyName : undefined;
}

/** Of a discriminated oneOf, the branch whose tag property takes the value's tag (undefined: not told, so all apply). */
function taggedBranch(schema: Schema, list: unknown[], value: unknown, resolve: RefResolver): unknown {
  const tag = tagOf(schema, resolve);
  if (!tag || !isObject(value) || !Object.hasOwn(value, tag)) return undefined;
  return list.find((branch) => {
    const b = isObject(branch) && typeof branch.$ref === 'string' ? resolve(branch.$ref) : branch;
    return isObject(b) && isObject(b.properties) && satisfies(b.properties[tag], value[tag]) !== false;
  });
}

/**
 * express-openapi-validator checks a body told apart by a discriminator with the
 * chosen branch alone, and says it differently from every other body: the
 * branch's issues have paths relative to the body (`/prompt`, not `/body/prompt`),
 * and a missing or unknown tag is one issue at the request's URL path listing
 * the tags. Here they are said as the same body without a discriminator would
 * have them: under `/body`, and the tag's issue as the field's own (body not an
 * object, tag missing, or not one of the values).
 */
export function rebaseTagged(issues: ValidatorIssue[], bodySchema: unknown, body: unknown, resolve: RefResolver): ValidatorIssue[] {
  const tag = tagOf(bodySchema, resolve);
  if (!tag) return issues;
  return issues.map((issue) => {
    const tagIssue = /^'[^']*' must be equal to one of the allowed values: (.*?)\.?$/.exec(issue.message ?? '');
    if (tagIssue && issue.errorCode === undefined) {
      if (!isObject(body)) return { path: '/body', message: 'must be object' };
      if (!Object.hasOwn(body, tag)) return { path: `/body/${tag}`, message: `must have required property '${tag}'` };
      return { path: `/body/${tag}`, message: `must be equal to one of the allowed values: ${tagIssue[1]}` };
    }
    // The request's other parts are validated apart and keep their prefix (an unknown
    // top-level field named `query` is `/query`, one segment: still the body's).
    if (/^\/(headers|query|params|cookies)\/./.test(issue.path ?? '')) return issue;
    return { ...issue, path: `/body${issue.path ?? ''}` };
  });
}

/** The schemas at `segments` below `schema` (object members and array items) for the request `body`, through every branch that applies. */
function schemasAt(schema: unknown, body: unknown, segments: string[], resolve: RefResolver): Schema[] {
  let value = body;
  let here = branches(schema, value, resolve);
  for (const segment of segments) {
    value = isObject(value) ? value[segment] : Array.isArray(value) ? value[Number(segment)] : undefined;
    const next: Schema[] = [];
    for (const s of here) {
      const properties = s.properties;
      if (isObject(properties) && Object.hasOwn(properties, segment)) next.push(...branches(properties[segment], value, resolve));
      else if (/^\d+$/.test(segment) && isObject(s.items)) next.push(...branches(s.items, value, resolve));
    }
    here = next;
  }
  return here;
}

/** The member names an object schema takes (a member whose schema is `false` is refused, so not listed). */
function acceptedNames(schemas: Schema[]): string[] {
  const names = new Set<string>();
  const refused = new Set<string>();
  for (const s of schemas) {
    if (!isObject(s.properties)) continue;
    for (const [name, sub] of Object.entries(s.properties)) (sub === false ? refused : names).add(name);
  }
  return [...names].filter((n) => !refused.has(n));
}

/** `body.messages.0.name` → `messages[0].name`. */
function fieldName(segments: string[]): string {
  return segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

const HEADER_RULES: Record<string, string> = {
  'idempotency-key': 'one key per logical request, 1–128 characters from letters, digits, `_`, `.`, `:`, `-`',
};

/** What an issue is read against. */
export interface IssueContext {
  /** The operation's request body schema for this request's media type, as the validator used it. */
  bodySchema: unknown;
  /** The request's body: it picks the if/then/else branches that apply. */
  body: unknown;
  /** The operation's parameters (`{name, in}`, or `$ref`s to them). */
  parameters: unknown;
  /** Finds what the contract's `$ref`s point at. */
  resolve: RefResolver;
}

/** The issue as a sentence, or undefined to let the caller say it its way. */
export function describeKnownIssue(issue: ValidatorIssue, context: IssueContext): string | undefined {
  const { bodySchema, body, resolve } = context;
  const segments = (issue.path ?? '')
    .replace(/^\.?\/?/, '')
    .split('/')
    .filter(Boolean);
  const [where, ...rest] = segments;
  const message = issue.message ?? '';
  if (where === 'body' && rest.length > 0 && /must NOT have (additional|unevaluated) propert/.test(message)) {
    const unknown = rest[rest.length - 1]!;
    const parent = rest.slice(0, -1);
    const accepted = acceptedNames(schemasAt(bodySchema, body, parent, resolve));
    const names = accepted.join(', ');
    if (parent.length === 0) return `unknown field \`${unknown}\`${names ? `; this operation accepts ${names}` : ''}`;
    if (parent.length === 1 && parent[0] === 'parameters') return `unknown parameter \`${unknown}\`${names ? `; \`parameters\` accepts ${names}` : ''}`;
    return `unknown field \`${unknown}\` in \`${fieldName(parent)}\`${names ? `, which accepts ${names}` : ''}`;
  }
  const unknownQuery = /^Unknown query parameter '(.+)'$/.exec(message);
  if (where === 'query' && unknownQuery) {
    const names = (Array.isArray(context.parameters) ? context.parameters : [])
      .map((p: unknown) => (isObject(p) && typeof p.$ref === 'string' ? resolve(p.$ref) : p))
      .filter((p): p is Schema => isObject(p) && p.in === 'query' && typeof p.name === 'string')
      .map((p) => p.name as string);
    return `Unknown query parameter '${unknownQuery[1]}'; ${names.length > 0 ? `this operation accepts ${names.join(', ')}` : 'this operation takes none'}`;
  }
  if (where === 'headers' && rest.length === 1) {
    const header = rest[0]!;
    const shown = header.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => `${dash}${c.toUpperCase()}`);
    const rule = Object.hasOwn(HEADER_RULES, header) ? `: ${HEADER_RULES[header]}` : '';
    if (/must have required property/.test(message)) return `the ${shown} header is missing${rule}`;
    const pattern = /must match pattern "(.*)"$/.exec(message);
    if (pattern) return `the ${shown} header is malformed${rule} (pattern ${pattern[1]})`;
  }
  return undefined;
}
