/**
 * `--param k=v` for media parameters. Values stay strings unless the contract
 * types the parameter as a number, boolean or list (MediaParameters* schemas),
 * so `resolution=1024` stays "1024" and `outputCount=2` becomes 2. `k:=JSON`
 * passes any JSON value as is.
 */
type Kind = 'image' | 'video' | 'audio';

const NUMBERS: Record<Kind, string[]> = {
  image: ['outputCount', 'seed'],
  video: ['duration', 'seed'],
  audio: ['speed', 'volume', 'temperature', 'seed'],
};
const BOOLEANS: Record<Kind, string[]> = { image: ['magicPrompt'], video: ['audio'], audio: [] };
const LISTS: Record<Kind, string[]> = { image: [], video: ['referenceVideos', 'referenceAudios'], audio: [] };

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
    if (NUMBERS[kind].includes(name)) {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--param ${name} must be a number`);
      out[name] = n;
    } else if (BOOLEANS[kind].includes(name)) {
      if (value !== 'true' && value !== 'false') throw new UsageError(`--param ${name} must be true or false`);
      out[name] = value === 'true';
    } else if (LISTS[kind].includes(name)) {
      out[name] = value.split(',').map((s) => s.trim()).filter(Boolean);
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
