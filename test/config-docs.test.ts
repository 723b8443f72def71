/**
 * Every environment variable the server reads is documented:
 * the names server/config.ts reads (and the one other place that reads the
 * environment) each have a row in the Configuration table of docs/operations.md.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

/** The variable names a source file reads (`env.NAME` or `process.env.NAME`). */
function variablesIn(source: string): string[] {
  return [...new Set([...source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\b/g)].map((m) => m[1]!))].sort();
}

describe('configuration docs', () => {
  it('when the server reads an environment variable, then the Configuration table in docs/operations.md documents it', () => {
    const page = read('docs/operations.md');
    const table = page.slice(page.indexOf('## Configuration'), page.indexOf('\n## ', page.indexOf('## Configuration') + 5));
    const documented = new Set([...table.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!));
    const serverFiles = fs
      .readdirSync(path.join(root, 'server'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.ts'));
    const read_ = new Map<string, string>();
    for (const file of serverFiles) for (const name of variablesIn(read(path.join('server', file)))) read_.set(name, file);
    assert.ok(read_.has('DATA_DIR') && read_.has('OPENAPI_PATH') && read_.has('VOICE_CATALOG_PATH'), 'the scan finds config.ts reads');
    const missing = [...read_].filter(([name]) => !documented.has(name)).map(([name, file]) => `${name} (read in server/${file})`);
    assert.deepEqual(missing, []);
  });
});
