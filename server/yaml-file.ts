/**
 * Reading the YAML files the server starts from (the contracts, the catalogs,
 * the moderation policy). The `yaml` package parses about 1 MB/s, so the four
 * reads of the contract and the policy were a large share of a start. The build
 * (scripts/build.ts) keeps each YAML file of the tree parsed, as JSON named by
 * the SHA-1 of its text, in dist/yaml/; a file whose text matches one of them is
 * read from it, any other (an edited file, OPENAPI_PATH elsewhere, no build) is
 * parsed as before, with the same errors. Each call returns a new document.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** Where the build keeps parsed YAML (scripts/build.ts writes it). */
export const PARSED_YAML_DIR = path.resolve(import.meta.dirname, '../dist/yaml');

/** The name of a YAML text's parsed copy in PARSED_YAML_DIR. */
export function parsedYamlName(text: string): string {
  return `${crypto.createHash('sha1').update(text).digest('hex')}.json`;
}

/** Loaded only on a miss: a start that finds every file parsed never loads the parser. */
let yaml: typeof import('yaml') | undefined;

/** The YAML text parsed (as `YAML.parse` does). */
export function parseYaml(text: string): unknown {
  yaml ??= createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return yaml.parse(text);
}

/** The document in a YAML file; throws as reading and `YAML.parse` do. */
export function readYamlFile(file: string): unknown {
  const text = fs.readFileSync(file, 'utf8');
  let parsed: string;
  try {
    parsed = fs.readFileSync(path.join(PARSED_YAML_DIR, parsedYamlName(text)), 'utf8');
  } catch {
    return parseYaml(text);
  }
  return JSON.parse(parsed);
}
