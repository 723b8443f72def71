/**
 * `--param k=v` for media parameters. Values stay strings unless the contract
 * types the parameter as a number, boolean or list (the MediaParameters*
 * schemas, read into generated/parameters.ts by `npm run generate`), so
 * `resolution=1024` stays "1024" and `outputCount=2` becomes 2. `k:=JSON`
 * passes any JSON value as is.
 */
import { PARAMETER_TYPES } from '../generated/parameters.ts';

type Kind = keyof typeof PARAMETER_TYPES;

/** The contract's value type of a parameter of `kind`; unknown names are strings (the server names them). */
function typeOf(kind: Kind, name: string): 'number' | 'boolean' | 'list' | 'string' {
  const types = PARAMETER_TYPES[kind] as Record<string, 'number' | 'boolean' | 'list' | 'string'>;
  return Object.hasOwn(types, name) ? types[name]! : 'string';
}

/** Parses `k=v` / `k:=json` pairs into a parameters object; throws a usage message on a bad pair. */
export function parseParams(kind: Kind, pairs: string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const pair of pairs) {
    const json = pair.match(/^([A-Za-z][A-Za-z0-9_]*):=(.*)$/s);
    if (json) {
      try {
        out[json[1]] = JSON.parse(json[2]);
      } catch {
        throw new UsageError(`--param ${pair}: the value after := must be JSON`);
      }
      continue;
    }
    const m = pair.match(/^([A-Za-z][A-Za-z0-9_]*)=(.*)$/s);
    if (!m) throw new UsageError(`--param ${pair}: expected name=value (or name:=JSON)`);
    const [, name, value] = m;
    const type = typeOf(kind, name);
    if (type === 'number') {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--param ${name} must be a number`);
      out[name] = n;
    } else if (type === 'boolean') {
      if (value !== 'true' && value !== 'false') throw new UsageError(`--param ${name} must be true or false`);
      out[name] = value === 'true';
    } else if (type === 'list') {
      out[name] = value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    } else {
      out[name] = value;
    }
  }
  return out;
}

/** A mistake in the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
