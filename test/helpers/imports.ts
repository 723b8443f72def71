/**
 * The import graph of server/, read off the sources, for the house-rule tests
 * (layers, import cycles): every `import`/`export … from` and every `import()`
 * of a written path, as paths relative to server/ (packages as written).
 */
import fs from 'node:fs';
import path from 'node:path';

export const SERVER = path.resolve(import.meta.dirname, '../../server');

/** Every .ts file under `dir` (relative to server/; '' for all of it), declarations left out. */
export function sources(dir: string): string[] {
  return (fs.readdirSync(path.join(SERVER, dir), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f));
}

export interface Import {
  /** Relative to server/ when the import is a path, else the package as written. */
  target: string;
  /** `import type …` / `export type … from`: gone at run time. */
  typeOnly: boolean;
}

/** The modules `file` (relative to server/) imports, type-only ones marked. */
export function importsOf(file: string): Import[] {
  const text = fs.readFileSync(path.join(SERVER, file), 'utf8');
  const found: Import[] = [];
  const pattern = /^(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
  for (const m of text.matchAll(pattern)) {
    const spec = m[2] ?? m[3];
    const target = spec.startsWith('.') ? path.relative(SERVER, path.resolve(path.dirname(path.join(SERVER, file)), spec)) : spec;
    found.push({ target, typeOnly: m[1] !== undefined });
  }
  return found;
}

/** The modules `file` imports at run time (type-only imports left out). */
export function runtimeImports(file: string): string[] {
  return importsOf(file)
    .filter((i) => !i.typeOnly)
    .map((i) => i.target);
}
