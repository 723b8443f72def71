/**
 * server/yaml-file.ts: a YAML file whose text the build kept parsed is read
 * from dist/yaml, any other is parsed (with the parser's own errors), and the
 * build's copies are what parsing gives.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { PARSED_YAML_DIR, parsedYamlName, readYamlFile } from '../../server/yaml-file.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-yaml-'));

describe('YAML files', () => {
  const planted: string[] = [];
  after(() => {
    for (const f of planted) fs.rmSync(f, { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("when a file's text has a parsed copy, then that copy is read (a new document each call)", () => {
    const text = `marker: ${crypto.randomUUID()}\n`;
    const file = path.join(dir, 'kept.yaml');
    fs.writeFileSync(file, text);
    fs.mkdirSync(PARSED_YAML_DIR, { recursive: true });
    const copy = path.join(PARSED_YAML_DIR, parsedYamlName(text));
    planted.push(copy);
    fs.writeFileSync(copy, JSON.stringify({ from: 'the copy' }));
    const first = readYamlFile(file) as { from: string };
    assert.deepEqual(first, { from: 'the copy' });
    first.from = 'changed by a caller';
    assert.deepEqual(readYamlFile(file), { from: 'the copy' });
  });

  it("when a file has no parsed copy, then it is parsed, and broken YAML throws the parser's error", () => {
    const file = path.join(dir, 'fresh.yaml');
    fs.writeFileSync(file, `list: [1, two, {three: 3}]\nid: ${crypto.randomUUID()}\n`);
    assert.deepEqual(readYamlFile(file), YAML.parse(fs.readFileSync(file, 'utf8')));
    const broken = path.join(dir, 'broken.yaml');
    fs.writeFileSync(broken, 'a: [1, 2\n');
    assert.throws(
      () => readYamlFile(broken),
      (e: Error) => e.name === 'YAMLParseError',
    );
    assert.throws(() => readYamlFile(path.join(dir, 'missing.yaml')), /ENOENT/);
  });

  it(
    'when the tree is built, then every YAML file the server reads has a copy equal to parsing it',
    { skip: !fs.existsSync(path.join(ROOT, 'dist/build.json')) && 'dist/ not built' },
    () => {
      for (const rel of [
        'openapi/openapi.yaml',
        'openapi/console.yaml',
        'server/catalog/models.yaml',
        'server/catalog/moderation.yaml',
        'server/catalog/voices.yaml',
      ]) {
        const text = fs.readFileSync(path.join(ROOT, rel), 'utf8');
        const copy = path.join(PARSED_YAML_DIR, parsedYamlName(text));
        if (!fs.existsSync(copy)) continue; // edited since the build: parsed at run time
        assert.deepEqual(JSON.parse(fs.readFileSync(copy, 'utf8')), YAML.parse(text), rel);
      }
    },
  );
});
