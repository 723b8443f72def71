/**
 * The audio request as every tool reads it: a oneOf of a speech body and a music
 * body told apart by `operation` (it was one object with an allOf of if/then
 * branches and `$ref`s with siblings). The rewrite must accept and refuse exactly
 * what the released 1.0.0 contract did, and leave the same body behind (the
 * validator fills in defaults, which the idempotency fingerprint covers). Both
 * contracts go through express-openapi-validator, as the server uses it, with a
 * grid of bodies over every rule of the two bodies.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Server } from 'node:http';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';

const root = path.resolve(import.meta.dirname, '..');
const V = 'voice_72f75e56f33b8e9d6d8f4475';
const A = 'asset_a41f0e9b22c7d5136e7f8a9b';

/** Bodies over every rule: operation × prompt length × parameters, and references and extras on a sample. */
function grid(): unknown[] {
  const operations = [undefined, 'speech', 'voice_clone', 'music', 'sing', 5];
  const prompts = [undefined, 'hi', '', 'x'.repeat(2000), 'x'.repeat(2001), 'p'.repeat(5001), 'p'.repeat(30_001)];
  const parameters = [
    undefined,
    {},
    null,
    [],
    { voiceProfileId: V },
    { voiceProfileId: '' },
    { voiceProfileId: V, speed: 1.1, volume: 0, temperature: 0.7, seed: 4_294_967_295 },
    { voiceProfileId: V, speed: 2.5 },
    { voiceProfileId: V, volume: -7 },
    { voiceProfileId: V, temperature: 1.2 },
    { voiceProfileId: V, musicMode: 'simple' },
    { voiceProfileId: V, coverAudio: A },
    { voiceProfileId: V, pitch: 2 },
    { musicMode: 'simple' },
    { musicMode: 'advanced' },
    { musicMode: 'pro' },
    { style: 'jazz' },
    { musicMode: 'advanced', style: 'jazz', title: 'T' },
    { musicMode: 'simple', title: 'Song' },
    { musicMode: 'advanced', title: 't'.repeat(81) },
    { negativeTags: 'n'.repeat(201) },
    { instrumental: 'off', vocalGender: 'f', duration: '120' },
    { duration: 30 },
    { coverAudio: A },
    { speed: 1 },
    { seed: 3 },
    { musicMode: 'advanced', voiceProfileId: V },
  ];
  const extras = [
    { referenceAssetIds: [] },
    { referenceAssetIds: [A] },
    { referenceAssetIds: [A, A] },
    { maxGems: 10 },
    { maxGems: -1 },
    { stream_options: 1 },
    { model: '' },
  ];
  const bodies: unknown[] = [[], 'x'];
  let i = 0;
  for (const operation of operations) {
    for (const prompt of prompts) {
      for (const p of parameters) {
        const body = {
          model: 'gemforge-speech-1',
          ...(operation !== undefined && { operation }),
          ...(prompt !== undefined && { prompt }),
          ...(p !== undefined && { parameters: p }),
        };
        bodies.push(body, { ...body, ...extras[i++ % extras.length] });
      }
    }
  }
  return bodies;
}

/** An app that answers 200 with the body as the validator leaves it, or the validator's status. */
function app(apiSpec: string): Promise<Server> {
  const a = express();
  a.use(express.json());
  a.use(
    OpenApiValidator.middleware({
      apiSpec,
      validateRequests: { allowUnknownQueryParameters: false },
      validateResponses: false,
      validateSecurity: false,
      validateFormats: true,
    }),
  );
  a.post('/api/generate/audio', (req, res) => res.json(req.body));
  a.use((err: { status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) => res.status(err.status ?? 500).json({}));
  return new Promise((resolve) => {
    const server = a.listen(0, '127.0.0.1', () => resolve(server));
  });
}

describe('the audio request as a oneOf of speech and music bodies', () => {
  let released: Server;
  let working: Server;
  before(async () => {
    [released, working] = await Promise.all([app(path.join(root, 'openapi/released/1.0.0.yaml')), app(path.join(root, 'openapi/openapi.yaml'))]);
  });
  after(() => {
    released.close();
    working.close();
  });

  async function post(server: Server, body: unknown): Promise<{ status: number; body: unknown }> {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/api/generate/audio`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1', authorization: 'Bearer x' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: res.status === 200 ? await res.json() : undefined };
  }

  it('when the released and the working contract see the same bodies, then they accept the same ones and leave the same body behind', async () => {
    const bodies = grid();
    let accepted = 0;
    for (const body of bodies) {
      const [a, b] = await Promise.all([post(released, body), post(working, body)]);
      const label = JSON.stringify(body).slice(0, 160);
      assert.equal(b.status, a.status, label);
      assert.deepEqual(b.body, a.body, label);
      if (a.status === 200) accepted++;
    }
    // The grid reaches both sides of the rules: a good share is accepted, most are refused.
    assert.ok(accepted > 40 && accepted < bodies.length / 2, `${accepted} of ${bodies.length} accepted`);
  });
});
