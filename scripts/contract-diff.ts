/**
 * What Optic's breaking-change rules do not see: a request
 * limit tightened between the released contract and the working one. A client
 * built on the released contract may send a 30,000-character prompt; if the
 * working contract says 20,000, that request now fails. Optic 1.0.9 passes such
 * a change (and cannot read the if/then branches of our media envelopes), so
 * this walks both documents side by side: every operation's request bodies and
 * parameters, through `$ref`, properties, items and allOf/anyOf/oneOf/if/then/else
 * (matched by position), and reports each constraint that refuses more than before.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

/** Upper bounds: lower is tighter. Lower bounds: higher is tighter. */
const UPPER = ['maxLength', 'maximum', 'exclusiveMaximum', 'maxItems', 'maxProperties'];
const LOWER = ['minLength', 'minimum', 'exclusiveMinimum', 'minItems', 'minProperties'];

function resolver(doc: Json) {
  return (node: unknown): unknown => {
    let current = node;
    for (let hops = 0; isObject(current) && typeof current.$ref === 'string' && current.$ref.startsWith('#/') && hops < 32; hops++) {
      let target: unknown = doc;
      for (const part of current.$ref.slice(2).split('/')) {
        const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
        target = isObject(target) ? target[key] : undefined;
      }
      // A $ref with siblings (3.1) keeps them: they constrain the referenced schema further.
      const { $ref: _ref, ...siblings } = current;
      current = isObject(target) ? { ...target, ...siblings } : target;
    }
    return current;
  };
}

const typesOf = (schema: Json): Set<string> | undefined =>
  schema.type === undefined ? undefined : new Set(Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string]);

/** The tightened constraints between two request schemas, each as `where: what`. */
function compareSchemas(released: unknown, working: unknown, where: string, r: (n: unknown) => unknown, w: (n: unknown) => unknown, seen: Set<unknown>, out: string[]): void {
  // A recursive schema is walked once per place it is reached from, to a bounded depth.
  if (seen.has(released) || where.split('.').length > 48) return;
  seen.add(released);
  const a = r(released);
  const b = w(working);
  if (!isObject(a) || !isObject(b)) return;
  for (const key of UPPER) {
    const before = a[key];
    const after = b[key];
    if (typeof after === 'number' && (typeof before !== 'number' || after < before)) out.push(`${where}: ${key} ${before ?? '(none)'} → ${after}`);
  }
  for (const key of LOWER) {
    const before = a[key];
    const after = b[key];
    if (typeof after === 'number' && (typeof before !== 'number' || after > before)) out.push(`${where}: ${key} ${before ?? '(none)'} → ${after}`);
  }
  if (typeof b.pattern === 'string' && b.pattern !== a.pattern) out.push(`${where}: pattern ${a.pattern === undefined ? '(none)' : JSON.stringify(a.pattern)} → ${JSON.stringify(b.pattern)}`);
  if (b.const !== undefined && JSON.stringify(b.const) !== JSON.stringify(a.const)) out.push(`${where}: const ${JSON.stringify(a.const ?? '(none)')} → ${JSON.stringify(b.const)}`);
  if (typeof b.multipleOf === 'number' && b.multipleOf !== a.multipleOf) out.push(`${where}: multipleOf ${a.multipleOf ?? '(none)'} → ${b.multipleOf}`);
  const typesA = typesOf(a);
  const typesB = typesOf(b);
  if (typesB && (!typesA || [...typesA].some((t) => !typesB.has(t)))) {
    out.push(`${where}: type ${typesA ? [...typesA].join('|') : '(any)'} → ${[...typesB].join('|')}`);
  }
  if (Array.isArray(a.enum) && Array.isArray(b.enum)) {
    const kept = new Set((b.enum as unknown[]).map((x) => JSON.stringify(x)));
    const gone = (a.enum as unknown[]).filter((v) => !kept.has(JSON.stringify(v)));
    if (gone.length > 0) out.push(`${where}: enum lost ${gone.map((v) => JSON.stringify(v)).join(', ')}`);
  }
  if (isObject(a.properties) && isObject(b.properties)) {
    for (const [name, sub] of Object.entries(a.properties)) {
      if (Object.hasOwn(b.properties, name)) compareSchemas(sub, b.properties[name], `${where}.${name}`, r, w, seen, out);
    }
  }
  if (a.items !== undefined && b.items !== undefined) compareSchemas(a.items, b.items, `${where}[]`, r, w, seen, out);
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    const listA = a[key];
    const listB = b[key];
    if (Array.isArray(listA) && Array.isArray(listB)) listA.forEach((s, i) => i < listB.length && compareSchemas(s, listB[i], `${where} ${key}[${i}]`, r, w, seen, out));
  }
  for (const key of ['then', 'else']) if (a[key] !== undefined && b[key] !== undefined) compareSchemas(a[key], b[key], `${where} (${key})`, r, w, seen, out);
}

/** Request constraints of `working` that refuse what `released` accepted, operation by operation. */
export function tightenedRequests(released: Json, working: Json): string[] {
  const r = resolver(released);
  const w = resolver(working);
  const out: string[] = [];
  const pathsA = isObject(released.paths) ? released.paths : {};
  const pathsB = isObject(working.paths) ? working.paths : {};
  for (const [path, itemA] of Object.entries(pathsA)) {
    const itemB = pathsB[path];
    if (!isObject(itemA) || !isObject(itemB)) continue;
    for (const method of METHODS) {
      const opA = r(itemA[method]);
      const opB = w(itemB[method]);
      if (!isObject(opA) || !isObject(opB)) continue;
      const name = `${method.toUpperCase()} ${path}`;
      const paramsA = ((opA.parameters as unknown[]) ?? []).map(r).filter(isObject);
      const paramsB = ((opB.parameters as unknown[]) ?? []).map(w).filter(isObject);
      for (const p of paramsA) {
        const q = paramsB.find((x) => x.name === p.name && x.in === p.in);
        if (q) compareSchemas(p.schema, q.schema, `${name} ${p.in} parameter ${p.name}`, r, w, new Set(), out);
      }
      const bodyA = r(opA.requestBody);
      const bodyB = w(opB.requestBody);
      if (!isObject(bodyA) || !isObject(bodyB) || !isObject(bodyA.content) || !isObject(bodyB.content)) continue;
      for (const [type, mediaA] of Object.entries(bodyA.content)) {
        const mediaB = bodyB.content[type];
        if (isObject(mediaA) && isObject(mediaB)) compareSchemas(mediaA.schema, mediaB.schema, `${name} request ${type} body`, r, w, new Set(), out);
      }
    }
  }
  return out;
}
