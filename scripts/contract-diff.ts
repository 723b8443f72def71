/**
 * The breaking-change rules of `npm run contract:check`: the released contract
 * and the working one walked side by side, operation by operation, each schema
 * compared through its flat view (contract-schema-view.ts) so a schema written
 * differently but meaning the same (an allOf of if/then become a oneOf of
 * bodies) compares equal.
 *
 * Breaking, for clients built on the released contract:
 * - an operation, a response status or a media type removed;
 * - a response field removed, no longer always present, given a new type or a
 *   new enum value (a client's switch does not know it);
 * - a request refused that was accepted: a field or parameter made required, a
 *   new required parameter, a field or query parameter removed where unknown
 *   ones are refused, a limit tightened (a larger minimum, a smaller maximum, a
 *   new or changed pattern or const), a type or enum narrowed, a new condition.
 * Everything else found (operations, fields, responses added) is a change.
 *
 * A limit the server already enforced when a version was released, written
 * into the contract later, refuses nothing that was accepted: the schema says
 * so with `x-limits-enforced-since: <version>`, and a tightened limit there (on
 * a contract released at or after that version) is a change, not a break. The
 * mark is a claim a reviewer checks against the server (its tests), as any
 * contract edit is; it covers the limits of that schema, not its type or enum.
 */
import { flatten, isObject, LOWER, resolver, tagsOf, UPPER, type Json, type Resolve, type Tags, type View } from './contract-schema-view.ts';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

/** One change: where in the operations it was found, in which named schema (if any), and what. */
export interface Finding {
  where: string;
  /** The path from the nearest named schema (`Task.releasedGems`): one change to a shared schema is one line. */
  at?: string;
  what: string;
}

export interface ContractDiff {
  /** Each change that breaks a client of the released contract. */
  breaking: Finding[];
  /** Each other change found. */
  changes: Finding[];
}

/** A finding as one line, by its operation path. */
export const line = (f: Finding) => `${f.where}: ${f.what}`;

/** Findings as lines, one per change: a change to a shared schema once, with the first place it shows and how many more. */
export function grouped(findings: Finding[]): string[] {
  const groups = new Map<string, string[]>();
  for (const f of findings) {
    const key = `${f.at ?? f.where}: ${f.what}`;
    groups.set(key, [...(groups.get(key) ?? []), f.where]);
  }
  return [...groups].map(([key, places]) => {
    const [first] = places;
    if (key.startsWith(`${first}: `)) return places.length > 1 ? `${key} (and ${places.length - 1} more)` : key;
    return `${key} (${first}${places.length > 1 ? ` and ${places.length - 1} more` : ''})`;
  });
}

interface Loc {
  where: string;
  at?: string;
}
const child = (loc: Loc, suffix: string): Loc => ({ where: loc.where + suffix, ...(loc.at !== undefined && { at: loc.at + suffix }) });
/** Entering a named schema (a plain `$ref` to components/schemas): what is found below is grouped under its name. */
function enter(loc: Loc, raw: unknown): Loc {
  const named = isObject(raw) && Object.keys(raw).length === 1 && typeof raw.$ref === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(raw.$ref) : null;
  return named ? { where: loc.where, at: named[1] } : loc;
}
const note = (list: Finding[], loc: Loc, what: string) => list.push({ ...loc, what });

interface Walk extends ContractDiff {
  r: Resolve;
  w: Resolve;
  /** The released contract's info.version. */
  releasedVersion: string;
}

/** Whether version `x` is at or before `y` (both X.Y.Z). */
function atOrBefore(x: string, y: string): boolean {
  const [a, b] = [x, y].map((v) => v.split('.').map(Number));
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return true;
}

const show = (v: unknown) => JSON.stringify(v);
const names = (v: unknown) => (Array.isArray(v) ? (v as string[]) : []);
const types = (view: View) => (view.type === undefined ? undefined : (view.type as string[]));
/** A `$ref` chain followed to its target (siblings dropped: for parameters, bodies and responses). */
function deref(resolve: Resolve, node: unknown): unknown {
  let current = node;
  for (let hops = 0; hops < 16 && isObject(current) && typeof current.$ref === 'string'; hops++) {
    const next = resolve(current);
    current = isObject(next) && Array.isArray(next.allOf) && Object.keys(next).length === 1 ? next.allOf[0] : next;
  }
  return current;
}

/** The constraints of one request schema that refuse more than before. */
function tighterLimits(a: View, b: View, out: string[]): void {
  for (const key of UPPER) {
    if (typeof b[key] === 'number' && (typeof a[key] !== 'number' || b[key] < a[key])) out.push(`${key} ${a[key] ?? '(none)'} → ${b[key]}`);
  }
  for (const key of LOWER) {
    if (typeof b[key] === 'number' && (typeof a[key] !== 'number' || b[key] > a[key])) out.push(`${key} ${a[key] ?? '(none)'} → ${b[key]}`);
  }
  if (typeof b.pattern === 'string' && b.pattern !== a.pattern)
    out.push(`pattern ${a.pattern === undefined ? '(none)' : show(a.pattern)} → ${show(b.pattern)}`);
  if (b.const !== undefined && show(b.const) !== show(a.const)) out.push(`const ${show(a.const ?? '(none)')} → ${show(b.const)}`);
  if (typeof b.multipleOf === 'number' && b.multipleOf !== a.multipleOf) out.push(`multipleOf ${a.multipleOf ?? '(none)'} → ${b.multipleOf}`);
  const [ta, tb] = [types(a), types(b)];
  if (tb && (!ta || ta.some((t) => !tb.includes(t)))) out.push(`type ${ta ? ta.join('|') : '(any)'} → ${tb.join('|')}`);
  if (Array.isArray(b.enum)) {
    const kept = new Set(b.enum.map(show));
    const gone = Array.isArray(a.enum) ? a.enum.filter((v) => !kept.has(show(v))) : [];
    if (gone.length > 0) out.push(`enum lost ${gone.map(show).join(', ')}`);
    else if (!Array.isArray(a.enum) && a.const === undefined) out.push(`enum (none) → ${b.enum.map(show).join(', ')}`);
  }
}

/** A request schema: what the working one refuses that the released one accepted. */
function request(ra: unknown, wb: unknown, loc: Loc, walk: Walk, depth: number): void {
  const a = flatten(ra, walk.r);
  const b = flatten(wb, walk.w);
  if (a !== false) requestViews(a, b, enter(loc, ra), walk, depth);
}

function requestViews(a: View, b: View | false, loc: Loc, walk: Walk, depth: number): void {
  if (depth > 24) return;
  if (b === false) {
    note(walk.breaking, loc, 'no longer accepted');
    return;
  }
  const limits: string[] = [];
  tighterLimits(a, b, limits);
  const since = b['x-limits-enforced-since'];
  for (const what of limits) {
    const documented = typeof since === 'string' && !/^(type|enum) /.test(what) && atOrBefore(since, walk.releasedVersion);
    if (documented) note(walk.changes, loc, `${what} (written down; enforced since ${since})`);
    else note(walk.breaking, loc, what);
  }
  const [pa, pb] = [(a.properties ?? {}) as Json, (b.properties ?? {}) as Json];
  for (const name of names(b.required)) if (!names(a.required).includes(name)) note(walk.breaking, child(loc, `.${name}`), 'now required');
  for (const [name, sub] of Object.entries(pa)) {
    if (sub === false) continue;
    if (Object.hasOwn(pb, name)) request(sub, pb[name], child(loc, `.${name}`), walk, depth + 1);
    else if (b.additionalProperties === false) note(walk.breaking, child(loc, `.${name}`), 'removed (unknown fields are refused)');
  }
  for (const name of Object.keys(pb)) if (!Object.hasOwn(pa, name) && pb[name] !== false) note(walk.changes, child(loc, `.${name}`), 'added');
  if (a.items !== undefined && b.items !== undefined) request(a.items, b.items, child(loc, '[]'), walk, depth + 1);
  for (const key of ['oneOf', 'anyOf']) {
    const [la, lb] = [a[key], b[key]];
    if (Array.isArray(la) && Array.isArray(lb)) la.forEach((s, i) => i < lb.length && request(s, lb[i], child(loc, ` ${key}[${i}]`), walk, depth + 1));
  }
  for (const c of b.conditionals) {
    const same = a.conditionals.find((x) => show(x.if) === show(c.if));
    if (!same) note(walk.breaking, loc, `a new condition (if ${show(c.if)})`);
    for (const branch of ['then', 'else'] as const) {
      if (same && same[branch] !== undefined && c[branch] !== undefined) request(same[branch], c[branch], child(loc, ` (${branch})`), walk, depth + 1);
      else if (same && c[branch] !== undefined) note(walk.breaking, loc, `a new ${branch} branch (if ${show(c.if)})`);
    }
  }
}

/** A request body, once per tag value it is told apart by (`operation: speech`, …). */
function requestBody(ra: unknown, wb: unknown, where: string, walk: Walk): void {
  const named = enter({ where }, ra);
  for (const tags of tagsOf([
    [ra, walk.r],
    [wb, walk.w],
  ])) {
    const a = flatten(ra, walk.r, tags);
    const b = flatten(wb, walk.w, tags);
    if (a === false) continue;
    const label = Object.entries(tags)
      .map(([k, v]) => `[${k}=${typeof v === 'string' ? v : show(v)}]`)
      .join('');
    if (b !== false) pin(a, b, tags);
    requestViews(a, b, child(named, label), walk, 0);
  }
}

/** The tag fields as the one value this view is for (their enums differ between bodies by design). */
function pin(a: View, b: View, tags: Tags): void {
  for (const [name, value] of Object.entries(tags)) {
    for (const view of [a, b])
      if (isObject(view.properties) && Object.hasOwn(view.properties, name)) view.properties = { ...view.properties, [name]: { const: value } };
  }
}

/** A response schema: what a client of the released one would misread in the working one. */
function response(ra: unknown, wb: unknown, outer: Loc, walk: Walk, depth: number): void {
  const a = flatten(ra, walk.r);
  const b = flatten(wb, walk.w);
  if (a === false || b === false || depth > 24) return;
  const loc = enter(outer, ra);
  const [ta, tb] = [types(a), types(b)];
  if (ta && (!tb || tb.some((t) => !ta.includes(t)))) note(walk.breaking, loc, `type ${ta.join('|')} → ${tb ? tb.join('|') : '(any)'}`);
  if (Array.isArray(a.enum)) {
    const known = new Set(a.enum.map(show));
    const added = Array.isArray(b.enum) ? b.enum.filter((v) => !known.has(show(v))) : ['(any value)'];
    if (added.length > 0) note(walk.breaking, loc, `new enum value ${added.map((v) => (v === '(any value)' ? v : show(v))).join(', ')}`);
  }
  const [pa, pb] = [(a.properties ?? {}) as Json, (b.properties ?? {}) as Json];
  for (const [name, sub] of Object.entries(pa)) {
    if (!Object.hasOwn(pb, name)) {
      note(walk.breaking, child(loc, `.${name}`), 'removed');
      continue;
    }
    if (names(a.required).includes(name) && !names(b.required).includes(name)) note(walk.breaking, child(loc, `.${name}`), 'no longer always present');
    response(sub, pb[name], child(loc, `.${name}`), walk, depth + 1);
  }
  for (const name of Object.keys(pb)) if (!Object.hasOwn(pa, name)) note(walk.changes, child(loc, `.${name}`), 'added');
  if (a.items !== undefined && b.items !== undefined) response(a.items, b.items, child(loc, '[]'), walk, depth + 1);
  for (const key of ['oneOf', 'anyOf']) {
    const [la, lb] = [a[key], b[key]];
    if (Array.isArray(la) && Array.isArray(lb)) la.forEach((s, i) => i < lb.length && response(s, lb[i], child(loc, ` ${key}[${i}]`), walk, depth + 1));
  }
}

type Param = Json & { name: string; in: string };
function parametersOf(resolve: Resolve, item: Json, op: Json): Param[] {
  const all = [...((item.parameters as unknown[]) ?? []), ...((op.parameters as unknown[]) ?? [])].map((p) => deref(resolve, p));
  return all.filter((p): p is Param => isObject(p) && typeof p.name === 'string' && typeof p.in === 'string');
}

function operation(itemA: Json, itemB: Json, opA: Json, opB: Json, name: string, walk: Walk): void {
  const paramsA = parametersOf(walk.r, itemA, opA);
  const paramsB = parametersOf(walk.w, itemB, opB);
  for (const p of paramsA) {
    const q = paramsB.find((x) => x.name.toLowerCase() === p.name.toLowerCase() && x.in === p.in);
    const where = `${name} ${p.in} parameter ${p.name}`;
    if (!q) {
      // Unknown query parameters are refused (the validator's allowUnknownQueryParameters is off); an unknown header is not.
      note(p.in === 'query' ? walk.breaking : walk.changes, { where }, 'removed');
      continue;
    }
    if (q.required === true && p.required !== true) note(walk.breaking, { where }, 'now required');
    request(p.schema, q.schema, { where }, walk, 0);
  }
  for (const q of paramsB) {
    if (paramsA.some((p) => p.name.toLowerCase() === q.name.toLowerCase() && p.in === q.in)) continue;
    note(
      q.required === true ? walk.breaking : walk.changes,
      { where: `${name} ${q.in} parameter ${q.name}` },
      q.required === true ? 'new and required' : 'added',
    );
  }

  const bodyA = deref(walk.r, opA.requestBody);
  const bodyB = deref(walk.w, opB.requestBody);
  if (isObject(bodyB) && bodyB.required === true && !(isObject(bodyA) && bodyA.required === true))
    note(walk.breaking, { where: `${name} request body` }, 'now required');
  if (isObject(bodyA) && isObject(bodyA.content)) {
    const contentB = isObject(bodyB) && isObject(bodyB.content) ? bodyB.content : {};
    for (const [type, mediaA] of Object.entries(bodyA.content)) {
      const mediaB = contentB[type];
      const listed = type.endsWith('/*') ? Object.keys(contentB).filter((t) => t.startsWith(type.slice(0, -1))) : [];
      if (!isObject(mediaB) && listed.length > 0) {
        // A range written out as the types it stands for: what the server took under the range, it still lists.
        note(walk.changes, { where: `${name} request ${type} body` }, `the range now listed as ${listed.join(', ')}`);
        for (const t of listed) if (isObject(mediaA)) requestBody(mediaA.schema, (contentB[t] as Json).schema, `${name} request ${type} body`, walk);
      } else if (!isObject(mediaB)) note(walk.breaking, { where: `${name} request ${type} body` }, 'media type removed');
      else if (isObject(mediaA)) requestBody(mediaA.schema, mediaB.schema, `${name} request ${type} body`, walk);
    }
  }

  const responsesA = isObject(opA.responses) ? opA.responses : {};
  const responsesB = isObject(opB.responses) ? opB.responses : {};
  for (const [status, rawA] of Object.entries(responsesA)) {
    const resA = deref(walk.r, rawA);
    const resB = deref(walk.w, responsesB[status]);
    if (!isObject(resB)) {
      note(walk.breaking, { where: `${name} response ${status}` }, 'removed');
      continue;
    }
    const contentA = isObject(resA) && isObject(resA.content) ? resA.content : {};
    const contentB = isObject(resB.content) ? resB.content : {};
    for (const [type, mediaA] of Object.entries(contentA)) {
      const mediaB = contentB[type];
      if (!isObject(mediaB)) note(walk.breaking, { where: `${name} response ${status} ${type}` }, 'removed');
      else if (isObject(mediaA)) response(mediaA.schema, mediaB.schema, { where: `${name} response ${status} ${type} body` }, walk, 0);
    }
  }
  for (const status of Object.keys(responsesB)) if (!Object.hasOwn(responsesA, status)) note(walk.changes, { where: `${name} response ${status}` }, 'added');
}

/** Every breaking change and every other change from `released` to `working`. */
export function diffContracts(released: Json, working: Json): ContractDiff {
  const version = isObject(released.info) ? String(released.info.version) : '0.0.0';
  const walk: Walk = { r: resolver(released), w: resolver(working), releasedVersion: version, breaking: [], changes: [] };
  const pathsA = isObject(released.paths) ? released.paths : {};
  const pathsB = isObject(working.paths) ? working.paths : {};
  for (const [path, rawA] of Object.entries(pathsA)) {
    const itemA = deref(walk.r, rawA);
    const itemB = deref(walk.w, pathsB[path]);
    if (!isObject(itemA)) continue;
    for (const method of METHODS) {
      const opA = itemA[method];
      if (!isObject(opA)) continue;
      const name = `${method.toUpperCase()} ${path}`;
      const opB = isObject(itemB) ? itemB[method] : undefined;
      if (!isObject(opB)) note(walk.breaking, { where: name }, 'operation removed');
      else operation(itemA, itemB as Json, opA, opB, name, walk);
    }
  }
  for (const [path, itemB] of Object.entries(pathsB)) {
    const itemA = pathsA[path];
    for (const method of METHODS) {
      if (isObject(itemB) && isObject(itemB[method]) && !(isObject(itemA) && isObject(itemA[method])))
        note(walk.changes, { where: `${method.toUpperCase()} ${path}` }, 'operation added');
    }
  }
  const unique = (list: Finding[]) => [...new Map(list.map((f) => [`${f.at}|${line(f)}`, f])).values()];
  return { breaking: unique(walk.breaking), changes: unique(walk.changes) };
}
