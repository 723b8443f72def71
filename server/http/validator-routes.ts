/**
 * express-openapi-validator (5.6) finds a request's operation by compiling
 * every documented path to a regular expression with path-to-regexp — on every
 * request, for every path until one matches (`lookupRoute` in its
 * openapi.metadata.js). The paths and options are the same each time, so the
 * compiled patterns are kept: the library calls `pathToRegexp` through the
 * module's exports object at call time, and that export is replaced, once, by
 * a memoizing wrapper (issue 13: about a twentieth of a task read's CPU).
 *
 * What it returns is unchanged (the same `{ regexp, keys }` objects; a
 * path-to-regexp 8 pattern has no `g` or `y` flag, so a shared RegExp keeps no
 * state between `exec` calls). Only string paths are kept, and at most
 * `MAX_PATTERNS` (the contract has a dozen). The wrapper is installed on the
 * path-to-regexp copy the validator itself resolves; express's router keeps
 * its own matchers, built once per route, and never calls this export.
 */
import { createRequire } from 'node:module';

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => { regexp: RegExp; keys: unknown[] };
interface PathToRegexpModule {
  pathToRegexp: PathToRegexp & { memoized?: true };
}

const MAX_PATTERNS = 1000;

/** The path-to-regexp module express-openapi-validator requires (its own resolution, not ours). */
export function validatorsPathToRegexp(): PathToRegexpModule {
  const fromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
  return fromValidator('path-to-regexp') as PathToRegexpModule;
}

/** Makes the validator's route lookup reuse compiled path patterns. Idempotent. */
export function cacheValidatorRoutePatterns(): void {
  const mod = validatorsPathToRegexp();
  if (mod.pathToRegexp.memoized) return;
  const compile = mod.pathToRegexp;
  const patterns = new Map<string, ReturnType<PathToRegexp>>();
  const memoized = (path: unknown, options?: Record<string, unknown>) => {
    if (typeof path !== 'string') return compile(path, options);
    const key = `${options?.sensitive ? 's' : '-'}${options?.strict ? 's' : '-'}${options?.end === false ? 'o' : '-'}${path}`;
    const known = patterns.get(key);
    if (known) return known;
    const compiled = compile(path, options);
    // Options other than the three in the key would make the key ambiguous: never keep those.
    const plain = !options || Object.keys(options).every((k) => k === 'sensitive' || k === 'strict' || k === 'end');
    if (plain && patterns.size < MAX_PATTERNS) patterns.set(key, compiled);
    return compiled;
  };
  mod.pathToRegexp = Object.assign(memoized, { memoized: true as const });
}
