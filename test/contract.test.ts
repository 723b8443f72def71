/**
 * The contract itself: generated/ is not stale, the server enforces the
 * contract on its own responses, and a broken contract stops start-up.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { startTestServer } from './helpers/server.ts';

const root = path.resolve(import.meta.dirname, '..');

describe('contract', () => {
  /** openapi-typescript on `spec`, compared with the committed `generated`. */
  function assertFresh(spec: string, generated: string): void {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gen-')), path.basename(generated));
    execFileSync(process.execPath, [path.join(root, 'node_modules/openapi-typescript/bin/cli.js'), spec, '--default-non-nullable', 'false', '-o', out], {
      cwd: root,
      stdio: 'pipe',
    });
    const fresh = fs.readFileSync(out, 'utf8');
    const committed = fs.readFileSync(path.join(root, generated), 'utf8');
    assert.ok(fresh === committed, `${generated} is stale: run "npm run generate" and commit the result`);
  }

  it('when the generator runs on the contract, then its output equals the committed generated/api.ts', () => {
    assertFresh('openapi/openapi.yaml', 'generated/api.ts');
  });

  it("when the generator runs on the console's contract, then its output equals the committed generated/console.ts", () => {
    assertFresh('openapi/console.yaml', 'generated/console.ts');
  });

  it('when the parameter generator runs on the contract, then its output equals the committed client/generated/parameters.ts', () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gen-')), 'parameters.ts');
    execFileSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/generate-parameters.ts'), 'openapi/openapi.yaml', out], {
      cwd: root,
      stdio: 'pipe',
    });
    const committed = fs.readFileSync(path.join(root, 'client/generated/parameters.ts'), 'utf8');
    assert.ok(fs.readFileSync(out, 'utf8') === committed, 'client/generated/parameters.ts is stale: run "npm run generate" and commit the result');
  });

  it('when the contract describes the whole interface, then it has the eleven operations on nine API paths, and the signed download path', () => {
    const doc = YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8'));
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.version, '1.0.0');
    const paths = Object.keys(doc.paths).filter((p) => p.startsWith('/api/'));
    assert.equal(paths.length, 9);
    const ops = paths.flatMap((p) => Object.keys(doc.paths[p]).filter((m) => ['get', 'head', 'post', 'put', 'patch', 'delete'].includes(m)));
    assert.equal(ops.length, 11);
    // Outside the API paths: the outputs' signed URLs, so a gateway or generated client built from the contract can follow them.
    assert.deepEqual(
      Object.keys(doc.paths).filter((p) => !p.startsWith('/api/')),
      ['/files/{assetId}'],
    );
    assert.deepEqual(doc.paths['/files/{assetId}'].get.security, []);
    assert.deepEqual(doc.components.schemas.Error.additionalProperties, false);
  });

  it('when a handler returns a response that breaks the contract, then the client gets 503 in the envelope, not the bad body', async () => {
    const catalog = YAML.parse(fs.readFileSync(path.join(root, 'server/catalog/models.yaml'), 'utf8'));
    catalog.models[0].baseGems = 'cheap'; // the contract says number
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-'));
    fs.writeFileSync(path.join(dir, 'models.yaml'), YAML.stringify(catalog));
    const s = await startTestServer({ env: { CATALOG_PATH: path.join(dir, 'models.yaml') } });
    try {
      const user = await s.user();
      const res = await s.call('GET', '/api/generate/models', { key: user.secret });
      assert.equal(res.status, 503);
      const body = await res.json();
      assert.equal(body.error.code, 'TEMPORARILY_UNAVAILABLE');
      assert.ok(!JSON.stringify(body).includes('cheap'));
    } finally {
      await s.close();
    }
  });

  it('when the contract file is invalid, then the server refuses to start instead of answering 500s', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'contract-'));
    const doc = YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8'));
    doc.paths['/api/generate/models'].get.responses = 'broken';
    fs.writeFileSync(path.join(dir, 'openapi.yaml'), YAML.stringify(doc));
    await assert.rejects(startTestServer({ env: { OPENAPI_PATH: path.join(dir, 'openapi.yaml') } }), /contract did not load/);
  });
});

describe('contract integer formats', () => {
  it('when Seed is read, then it is format int64 (its maximum, 2^32 - 1, is past int32, so generators must not make it a 32-bit int), and the server takes the whole range', async () => {
    const doc = YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8'));
    const seed = doc.components.schemas.Seed;
    assert.equal(seed.format, 'int64');
    assert.equal(seed.maximum, 4294967295);
    // No worker: only the answers are checked, not the image the accepted submission would make.
    const s = await startTestServer({ env: { WORKER_ENABLED: 'false' } });
    try {
      const { secret } = await s.user({ gems: 1000 });
      const submit = (seedValue: number, key: string) =>
        s.call('POST', '/api/generate/image', {
          key: secret,
          headers: { 'idempotency-key': key },
          body: { model: 'gemforge-image-1', prompt: 'A lighthouse', parameters: { seed: seedValue, resolution: '512' } },
        });
      assert.equal((await submit(4294967295, `seed-max-${process.pid}`)).status, 202);
      assert.equal((await submit(4294967296, `seed-over-${process.pid}`)).status, 422);
    } finally {
      await s.close();
    }
  });
});
