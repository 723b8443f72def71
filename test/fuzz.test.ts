/**
 * A bounded, seeded fuzz of all eleven operations at the real server:
 * a few thousand requests built from the contract's schemas with fast-check,
 * mostly well-formed and partly broken in the ways clients break them. Every
 * answer must carry a status from the spec's set, never a 503 (nothing here is
 * unavailable), and every error must be exactly the Error envelope.
 * The account has no Gems and no LLM allowance, so well-formed submissions stop
 * at 402 and no generation work runs.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { loadContract, resolveRef, type Json } from './helpers/contract-schemas.ts';
import { fromSchema, nastyString, withMistakes } from './helpers/schema-arbitrary.ts';

const SEED = 16_2026;
const RUNS = 260; // per operation: eleven operations, ~2,900 requests
const SPEC_STATUSES = new Set([200, 201, 202, 400, 401, 402, 403, 404, 409, 413, 422, 502, 503]);
const contract = loadContract();

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Blob | FormData;
}

const jsonSchemaOf = (path: string) => resolveRef(contract, contract.paths[path].post.requestBody.content['application/json'].schema);
/** Printable ASCII a header can carry (fetch refuses the rest before it leaves). */
const headerValue = fc.string({ maxLength: 140 }).map((v) => v.replace(/[^\x20-\x7e]/g, 'x'));
const idemKey = fc.oneof({ weight: 4, arbitrary: fc.stringMatching(/^[a-zA-Z0-9_.:-]{1,40}$/) }, { weight: 1, arbitrary: headerValue });

/** JSON text of a body, sometimes with a non-finite number or cut short. */
const jsonText = (value: fc.Arbitrary<Json>) =>
  fc.tuple(value, fc.nat({ max: 9 })).map(([v, n]) => {
    const text = JSON.stringify(v) ?? 'null';
    if (n === 0) return text.replace(/\d+(\.\d+)?/, '1e400');
    if (n === 1) return text.slice(0, Math.max(1, Math.floor(text.length / 2)));
    return text;
  });

function operations(key: string): Record<string, fc.Arbitrary<Req>> {
  const auth = fc.oneof({ weight: 9, arbitrary: fc.constant(`Bearer ${key}`) }, { weight: 1, arbitrary: headerValue });
  const post = (path: string) =>
    fc.record({ body: jsonText(withMistakes(fromSchema(contract, jsonSchemaOf(path)))), auth, idem: idemKey }).map(({ body, auth: a, idem }) => ({
      method: 'POST',
      path,
      headers: { authorization: a, 'content-type': 'application/json', 'idempotency-key': idem },
      body,
    }));
  const taskId = fc.oneof(
    fc.oneof(fc.stringMatching(/^task_[a-z0-9]{1,24}$/), nastyString).map((id) => encodeURIComponent(id) || 'x'),
    fc.constantFrom('%', '%E0%A4%A', '%zz', '%00', '..%2F..%2Fetc'), // not valid percent-encoding, or tricks
  );
  const query = fc.dictionary(
    fc.constantFrom('scope', 'page', 'language', 'x'),
    fc.oneof(nastyString, fc.constantFrom('mine', 'explore', '1', '10000', '10001', '1e400', 'Infinity', 'en-US')),
    { maxKeys: 3 },
  );
  const qs = (q: Record<string, string>) => (Object.keys(q).length ? `?${new URLSearchParams(q)}` : '');
  return {
    listModels: fc.record({ auth, q: query }).map(({ auth: a, q }) => ({ method: 'GET', path: `/api/generate/models${qs(q)}`, headers: { authorization: a } })),
    createImage: post('/api/generate/image'),
    createVideo: post('/api/generate/video'),
    createAudio: post('/api/generate/audio'),
    getTask: fc.record({ auth, id: taskId }).map(({ auth: a, id }) => ({ method: 'GET', path: `/api/generate/tasks/${id}`, headers: { authorization: a } })),
    headTask: fc.record({ auth, id: taskId }).map(({ auth: a, id }) => ({ method: 'HEAD', path: `/api/generate/tasks/${id}`, headers: { authorization: a } })),
    createAsset: fc
      .record({
        auth,
        type: fc.oneof(
          fc.constantFrom('image/png', 'image/jpeg', 'video/mp4', 'audio/wav', 'audio/x-wav', 'text/plain', 'application/json', 'image/constructor'),
          headerValue,
        ),
        bytes: fc.uint8Array({ maxLength: 256 }),
      })
      .map(({ auth: a, type, bytes }) => ({
        method: 'POST',
        path: '/api/generate/assets',
        headers: { authorization: a, 'content-type': type },
        body: new Blob([new Uint8Array(bytes)]),
      })),
    listVoices: fc.record({ auth, q: query }).map(({ auth: a, q }) => ({ method: 'GET', path: `/api/generate/voices${qs(q)}`, headers: { authorization: a } })),
    createVoice: fc
      .record({
        auth,
        fields: fc.dictionary(
          fc.constantFrom('duration', 'rightsConfirmed', 'name', 'file', 'constructor'),
          fc.oneof(nastyString, fc.constantFrom('20', '15', '300', '300.5', 'true')),
        ),
        bytes: fc.option(fc.uint8Array({ maxLength: 256 })),
      })
      .map(({ auth: a, fields, bytes }) => {
        const form = new FormData();
        for (const [k, v] of Object.entries(fields)) form.append(k, v);
        if (bytes) form.append('file', new Blob([bytes], { type: 'audio/wav' }), 'v.wav');
        return { method: 'POST', path: '/api/generate/voices', headers: { authorization: a }, body: form };
      }),
    createChatCompletion: post('/api/generate/text/v1/chat/completions'),
    extractVideo: post('/api/generate/extract/video'),
    // The signed download: no key; whatever the link, an invalid one is 403 and a bad path 404.
    downloadFile: fc
      .record({
        id: taskId,
        q: fc.dictionary(
          fc.constantFrom('expires', 'sig', 'x'),
          fc.oneof(nastyString, fc.constantFrom('1736939400', '01736939400', '9'.repeat(13), 'f'.repeat(64), 'F'.repeat(64))),
          { maxKeys: 3 },
        ),
      })
      .map(({ id, q }) => ({ method: 'GET', path: `/files/${id}${qs(q)}`, headers: {} })),
  };
}

/** The answer is within the spec: a status of its set, no 503, an error is exactly the envelope. */
async function assertWithinSpec(req: Req, res: Response): Promise<void> {
  const label = `${req.method} ${req.path.slice(0, 120)} → ${res.status}`;
  assert.ok(SPEC_STATUSES.has(res.status), `${label}: status outside the spec's set`);
  assert.notEqual(res.status, 503, `${label}: nothing here is unavailable`);
  const text = await res.text();
  if (req.method === 'HEAD') return assert.equal(text, '', label);
  if (res.status < 300) return;
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, label);
  const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
  assert.deepEqual(Object.keys(body), ['error'], `${label}: ${text.slice(0, 200)}`);
  assert.equal(typeof body.error!.message, 'string', label);
  assert.ok(
    Object.keys(body.error!).every((k) => k === 'code' || k === 'message'),
    `${label}: ${text.slice(0, 200)}`,
  );
  if (body.error!.code !== undefined) assert.equal(typeof body.error!.code, 'string', label);
}

describe('fuzz: every operation, from the contract', () => {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startTestServer();
    key = (await s.user({ gems: 0, llmAllowance: 0 })).secret;
  });
  after(() => s.close());

  it("when the contract's operations are listed, then the fuzz covers each of them", () => {
    const ids = Object.values(contract.paths as Record<string, Json>).flatMap((item) =>
      Object.values(item)
        .map((op: Json) => op?.operationId)
        .filter(Boolean),
    );
    assert.deepEqual(new Set(ids), new Set(Object.keys(operations('k'))));
  });

  for (const name of Object.keys(operations('placeholder'))) {
    it(`when ${RUNS} generated ${name} requests arrive, then every answer is within the spec (status set, no 503, the envelope)`, async () => {
      const live = operations(key)[name]!;
      await fc.assert(
        fc.asyncProperty(live, async (req) => {
          const res = await fetch(new URL(req.path, s.url), { method: req.method, headers: req.headers, body: req.body });
          await assertWithinSpec(req, res);
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true },
      );
    });
  }
});
