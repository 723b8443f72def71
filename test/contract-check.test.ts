/**
 * `npm run contract:check`: the working contract against the
 * released one. It fails on a removed response field, a new required request
 * field, a narrowed enum and a tightened limit, lets an added optional field
 * through, and lets a breaking change through once info.version's major is raised.
 * It reads a body rewritten in another shape (the audio request as a oneOf of
 * speech and music bodies) as the same body, and still finds a limit tightened
 * inside it. Each case edits a copy of the released contract and runs the real
 * script; it needs nothing installed beyond the repository's own dependencies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { diffContracts, line } from '../scripts/contract-diff.ts';

const root = path.resolve(import.meta.dirname, '..');
const releasedFile = path.join(root, 'openapi/released/1.0.0.yaml');
type Doc = Record<string, any>;
const released = () => YAML.parse(fs.readFileSync(releasedFile, 'utf8')) as Doc;
const working = () => YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8')) as Doc;

/** The released contract with the working contract's audio request (a oneOf of speech and music bodies) in place of its own. */
function withWorkingAudio(doc: Doc): void {
  const now = working().components.schemas;
  for (const name of ['AudioRequest', 'SpeechRequest', 'MusicRequest', 'MediaParametersSpeech', 'MediaParametersMusic'])
    doc.components.schemas[name] = now[name];
}

/** Runs the check of `edit(released copy)` against the released contract. */
function check(edit: (doc: Doc) => void): { code: number | null; out: string } {
  const doc = released();
  edit(doc);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-contract-'));
  try {
    const working = path.join(dir, 'openapi.yaml');
    fs.writeFileSync(working, YAML.stringify(doc));
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(root, 'scripts/contract-check.ts'), '--released', releasedFile, '--working', working],
      {
        cwd: root,
        encoding: 'utf8',
        timeout: 300_000,
      },
    );
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
    // One line for one change, though the task shows in seven responses.
    assert.match(
      out,
      /Breaking changes \(1\)[^\n]*\n {2}x Task\.releasedGems: removed \(POST \/api\/generate\/image response 200 application\/json body\.task\.releasedGems and 6 more\)\n\n/,
    );
    assert.match(out, /BREAKING: the changes above break clients of 1\.0\.0/);
  });

  it('when a request field becomes required, then the check fails and names it', () => {
    const { code, out } = check((doc) => schemas(doc).ExtractionRequest.required.push('prompt'));
    assert.equal(code, 1, out);
    assert.match(out, /x ExtractionRequest\.prompt: now required \(POST \/api\/generate\/extract\/video request application\/json body\.prompt\)/);
    assert.match(out, /BREAKING/);
  });

  it('when an enum is narrowed, then the check fails and names the lost value', () => {
    const { code, out } = check((doc) => (schemas(doc).ChatMessage.properties.role.enum = ['user', 'assistant']));
    assert.equal(code, 1, out);
    assert.match(
      out,
      /x ChatMessage\.role: enum lost "system" \(POST \/api\/generate\/text\/v1\/chat\/completions request application\/json body\.messages\[\]\.role\)/,
    );
  });

  it('when a request limit is tightened, then the check fails and names the limit before and after', () => {
    const { code, out } = check((doc) => (schemas(doc).MediaPrompt.maxLength = 20_000));
    assert.equal(code, 1, out);
    assert.match(out, /x MediaPrompt: maxLength 30000 → 20000 \(POST \/api\/generate\/image request application\/json body\.prompt and 2 more\)/);
  });

  it('when an optional request field is added, then the check passes and the changelog shows it', () => {
    const { code, out } = check((doc) => (schemas(doc).ExtractionRequest.properties.note = { type: 'string', maxLength: 100 }));
    assert.equal(code, 0, out);
    assert.match(out, /\+ ExtractionRequest\.note: added \(POST \/api\/generate\/extract\/video request application\/json body\.note\)/);
    assert.match(out, /no breaking change/);
  });

  it('when the audio request is rewritten as a oneOf of speech and music bodies, then it reads as the same request', () => {
    const { code, out } = check(withWorkingAudio);
    assert.equal(code, 0, out);
    assert.match(out, /no breaking change/);
    assert.doesNotMatch(out, /audio/);
  });

  it('when a limit is tightened inside one body of the rewritten audio request, then the check fails naming the operation value', () => {
    const { code, out } = check((doc) => {
      withWorkingAudio(doc);
      schemas(doc).SpeechRequest.properties.prompt.maxLength = 1000;
      schemas(doc).MediaParametersMusic.properties.title.maxLength = 40;
      schemas(doc).SpeechRequest.properties.operation.enum = ['speech'];
    });
    assert.equal(code, 1, out);
    assert.match(
      out,
      /x AudioRequest\[operation=speech\]\.prompt: maxLength 2000 → 1000 \(POST \/api\/generate\/audio request application\/json body\[operation=speech\]\.prompt\)/,
    );
    assert.match(out, /x AudioRequest\[operation=music\]\.parameters\.title: maxLength 80 → 40/);
    assert.match(out, /x AudioRequest\[operation=voice_clone\]: no longer accepted/);
    assert.doesNotMatch(out, /operation=music\]\.prompt/);
  });

  it('when a limit the server already enforced is written down with x-limits-enforced-since, then it is a change, not a break', () => {
    const { code, out } = check((doc) => {
      const param = doc.paths['/api/generate/assets'].post.parameters.find((p: Doc) => p.name === 'X-Filename');
      param.schema.maxLength = 16384;
      param.schema['x-limits-enforced-since'] = '1.0.0';
      schemas(doc).MediaPrompt.maxLength = 20_000;
      schemas(doc).MediaPrompt['x-limits-enforced-since'] = '1.1.0';
    });
    assert.equal(code, 1, out);
    assert.match(out, /\+ POST \/api\/generate\/assets header parameter X-Filename: maxLength \(none\) → 16384 \(written down; enforced since 1\.0\.0\)/);
    // Marked as enforced only since a later version than the released one: still a break for 1.0.0's clients.
    assert.match(out, /x MediaPrompt: maxLength 30000 → 20000/);
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
    const before = {
      paths: { '/x': { post: { requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/X' } } } } } } },
      components: {
        schemas: {
          X: {
            type: 'object',
            properties: {
              a: { type: 'string', maxLength: 10 },
              b: { type: 'integer', minimum: 1, maximum: 5 },
              c: { type: ['string', 'null'] },
              d: { enum: ['p', 'q'] },
              e: { type: 'array', items: { type: 'string', maxLength: 3 } },
            },
          },
        },
      },
    };
    const after = structuredClone(before) as Doc;
    const x = after.components.schemas.X.properties;
    x.a.maxLength = 20; // looser: fine
    x.b.minimum = 2; // tighter
    x.c.type = 'string'; // null no longer accepted
    x.d.enum = ['p']; // q lost
    x.e.items.maxLength = 2; // tighter, inside items
    x.a.pattern = '^[a-z]+$'; // new pattern
    assert.deepEqual(diffContracts(before, after).breaking.map(line).sort(), [
      'POST /x request application/json body.a: pattern (none) → "^[a-z]+$"',
      'POST /x request application/json body.b: minimum 1 → 2',
      'POST /x request application/json body.c: type string|null → string',
      'POST /x request application/json body.d: enum lost "q"',
      'POST /x request application/json body.e[]: maxLength 3 → 2',
    ]);
  });
});
