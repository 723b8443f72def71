/**
 * `npm run contract:check`: the working contract against the
 * released one. It fails on a removed response field, a new required request
 * field, a narrowed enum and a tightened limit, lets an added optional field
 * through, and lets a breaking change through once info.version's major is raised.
 * Each case edits a copy of the released contract and runs the real script.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { tightenedRequests } from '../scripts/contract-diff.ts';

const root = path.resolve(import.meta.dirname, '..');
const releasedFile = path.join(root, 'openapi/released/1.0.0.yaml');
type Doc = Record<string, any>;
const released = () => YAML.parse(fs.readFileSync(releasedFile, 'utf8')) as Doc;

/** Runs the check of `edit(released copy)` against the released contract. */
function check(edit: (doc: Doc) => void): { code: number | null; out: string } {
  const doc = released();
  edit(doc);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-contract-'));
  try {
    const working = path.join(dir, 'openapi.yaml');
    fs.writeFileSync(working, YAML.stringify(doc));
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/contract-check.ts'), '--released', releasedFile, '--working', working], {
      cwd: root,
      encoding: 'utf8',
      timeout: 300_000,
    });
    return { code: run.status, out: `${run.stdout}${run.stderr}` };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const schemas = (doc: Doc) => doc.components.schemas;

describe('contract:check', () => {
  it('when the working contract is the released one, then there is no breaking change', () => {
    const { code, out } = check(() => undefined);
    assert.equal(code, 0, out);
    assert.match(out, /no breaking change/);
  });

  it('when a response field is removed, then the check fails and names it', () => {
    const { code, out } = check((doc) => {
      const task = schemas(doc).Task;
      delete task.properties.releasedGems;
      task.required = task.required.filter((f: string) => f !== 'releasedGems');
    });
    assert.equal(code, 1, out);
    assert.match(out, /releasedGems/);
    assert.match(out, /BREAKING: the changes above break clients of 1\.0\.0/);
  });

  it('when a request field becomes required, then the check fails and names it', () => {
    const { code, out } = check((doc) => schemas(doc).ExtractionRequest.required.push('prompt'));
    assert.equal(code, 1, out);
    assert.match(out, /cannot make a request property required/);
    assert.match(out, /BREAKING/);
  });

  it('when an enum is narrowed, then the check fails and names the lost value', () => {
    const { code, out } = check((doc) => (schemas(doc).ChatMessage.properties.role.enum = ['user', 'assistant']));
    assert.equal(code, 1, out);
    assert.match(out, /cannot remove enum option 'system'/);
  });

  it('when a request limit is tightened, then the check fails and names the limit before and after', () => {
    const { code, out } = check((doc) => (schemas(doc).MediaPrompt.maxLength = 20_000));
    assert.equal(code, 1, out);
    assert.match(out, /POST \/api\/generate\/image request application\/json body\.prompt: maxLength 30000 → 20000/);
  });

  it('when an optional request field is added, then the check passes and the changelog shows it', () => {
    const { code, out } = check((doc) => (schemas(doc).ExtractionRequest.properties.note = { type: 'string', maxLength: 100 }));
    assert.equal(code, 0, out);
    assert.match(out, /note: added/);
    assert.match(out, /no breaking change/);
  });

  it("when a breaking change comes with info.version's major raised, then the check passes and says so", () => {
    const { code, out } = check((doc) => {
      schemas(doc).MediaPrompt.maxLength = 20_000;
      doc.info.version = '2.0.0';
    });
    assert.equal(code, 0, out);
    assert.match(out, /breaking changes, released as a new major version \(1\.0\.0 → 2\.0\.0\)/);
  });
});

describe('tightened request limits', () => {
  it('when bounds, patterns, types and enums change, then only what refuses more is reported', () => {
    const before = { paths: { '/x': { post: { requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/X' } } } } } } }, components: { schemas: { X: {
      type: 'object',
      properties: { a: { type: 'string', maxLength: 10 }, b: { type: 'integer', minimum: 1, maximum: 5 }, c: { type: ['string', 'null'] }, d: { enum: ['p', 'q'] }, e: { type: 'array', items: { type: 'string', maxLength: 3 } } },
    } } } };
    const after = structuredClone(before) as Doc;
    const x = after.components.schemas.X.properties;
    x.a.maxLength = 20; // looser: fine
    x.b.minimum = 2; // tighter
    x.c.type = 'string'; // null no longer accepted
    x.d.enum = ['p']; // q lost
    x.e.items.maxLength = 2; // tighter, inside items
    x.a.pattern = '^[a-z]+$'; // new pattern
    assert.deepEqual(tightenedRequests(before, after).sort(), [
      'POST /x request application/json body.a: pattern (none) → "^[a-z]+$"',
      'POST /x request application/json body.b: minimum 1 → 2',
      'POST /x request application/json body.c: type string|null → string',
      'POST /x request application/json body.d: enum lost "q"',
      'POST /x request application/json body.e[]: maxLength 3 → 2',
    ]);
  });
});
