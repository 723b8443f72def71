/**
 * fast-check arbitraries from the contract's schemas, for fuzzing: values that
 * mostly follow a schema (so requests get past the validator and reach the
 * domain), mixed with the mistakes a client makes (missing or unknown fields,
 * wrong types, boundary and non-finite numbers, inherited property names).
 */
import fc from 'fast-check';
import { resolveRef, type Json } from './contract-schemas.ts';
import { PROTOTYPE_NAMES } from './prototype-names.ts';

/** Strings that have broken servers before. */
const NASTY_STRINGS = [
  ...PROTOTYPE_NAMES,
  '',
  ' ',
  'null',
  'NaN',
  'Infinity',
  '1e400',
  '-0',
  '0x10',
  '../../etc/passwd',
  '%00',
  '\u0000',
  '\u202e',
  '😀',
  'a'.repeat(300),
  '[[scenario:fail]]',
];
const NASTY_NUMBERS = [0, -0, -1, 1, 0.5, 1e-9, 2 ** 31, 2 ** 53 + 1, -(2 ** 53), 1e21, Number.MAX_VALUE];

export const nastyString = fc.oneof(fc.constantFrom(...NASTY_STRINGS), fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 20 }));

function stringArb(schema: Json): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0;
  const max = Math.min(schema.maxLength ?? 60, min + 60);
  return fc.oneof({ weight: 3, arbitrary: fc.string({ minLength: min, maxLength: Math.max(min, max) }) }, { weight: 1, arbitrary: nastyString });
}

function numberArb(schema: Json, integer: boolean): fc.Arbitrary<number> {
  const lo = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -1000);
  const hi = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : 1000);
  const inRange = integer ? fc.integer({ min: Math.ceil(lo), max: Math.floor(Math.max(lo, hi)) }) : fc.double({ min: lo, max: Math.max(lo, hi), noNaN: true });
  return fc.oneof({ weight: 4, arbitrary: inRange }, { weight: 1, arbitrary: fc.constantFrom(lo - 1, hi + 1, ...NASTY_NUMBERS) });
}

/** Values that mostly follow `schema` (resolved in `contract`); depth-bounded. */
export function fromSchema(contract: Json, raw: Json, depth = 0): fc.Arbitrary<Json> {
  const schema = resolveRef(contract, raw) ?? {};
  if (depth > 5) return fc.constant(null);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alternatives)) return fc.oneof(...alternatives.map((s: Json) => fromSchema(contract, s, depth + 1)));
  if (Array.isArray(schema.allOf) && !schema.type && !schema.properties) return fromSchema(contract, schema.allOf[0], depth + 1);
  const type = Array.isArray(schema.type)
    ? schema.type
    : schema.type
      ? [schema.type]
      : schema.properties
        ? ['object']
        : ['string', 'number', 'boolean', 'null'];
  return fc.oneof(
    ...type.map((t: string): fc.Arbitrary<Json> => {
      switch (t) {
        case 'object': {
          const props = (schema.properties ?? {}) as Record<string, Json>;
          const entries = Object.fromEntries(
            Object.entries(props)
              .filter(([, s]) => s !== false)
              .map(([k, s]) => [k, fromSchema(contract, s, depth + 1)]),
          );
          return fc.record(entries, { requiredKeys: (schema.required ?? []).filter((k: string) => k in entries) });
        }
        case 'array':
          return fc.array(fromSchema(contract, schema.items ?? {}, depth + 1), { maxLength: Math.min(schema.maxItems ?? 3, 3) });
        case 'integer':
          return numberArb(schema, true);
        case 'number':
          return numberArb(schema, false);
        case 'boolean':
          return fc.boolean();
        case 'null':
          return fc.constant(null);
        default:
          return stringArb(schema);
      }
    }),
  );
}

/** A schema-shaped value, or one with a client's mistake in it. */
export function withMistakes(valid: fc.Arbitrary<Json>): fc.Arbitrary<Json> {
  const mutated = fc.tuple(valid, fc.nat(), nastyString, fc.jsonValue({ maxDepth: 2 })).map(([v, n, name, junk]) => {
    if (!v || typeof v !== 'object' || Array.isArray(v)) return junk;
    const keys = Object.keys(v);
    const out = { ...v };
    switch (n % 4) {
      case 0: // a missing field
        if (keys.length) delete out[keys[n % keys.length]!];
        return out;
      case 1: // an unknown (maybe inherited) field name
        return { ...out, [name]: junk };
      case 2: // a field of the wrong type
        if (keys.length) out[keys[n % keys.length]!] = junk;
        return out;
      default: // nested one level: the same in `parameters`
        return out.parameters && typeof out.parameters === 'object' ? { ...out, parameters: { ...out.parameters, [name]: junk } } : out;
    }
  });
  return fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: mutated }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) });
}
