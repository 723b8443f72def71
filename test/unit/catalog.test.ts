/** The catalog is parsed once into per-kind types; a broken entry stops the load naming the entry and the field. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { loadCatalog } from '../../server/domain/catalog.ts';

const SHIPPED = path.join(import.meta.dirname, '../../server/catalog/models.yaml');

/** The shipped catalog with one change, written to a temp file and loaded. */
function loadChanged(change: (doc: { models: Array<Record<string, any>>; analysis: Record<string, any> }) => void) {
  const doc = YAML.parse(fs.readFileSync(SHIPPED, 'utf8'));
  change(doc);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-catalog-'));
  const file = path.join(dir, 'models.yaml');
  fs.writeFileSync(file, YAML.stringify(doc));
  try {
    return loadCatalog(file);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const model = (doc: { models: Array<Record<string, any>> }, id: string) => doc.models.find((m) => m.id === id)!;

describe('typed catalog', () => {
  it('when the shipped catalog loads, then each kind carries its typed rate card and discovery lists the file’s capabilities unchanged', () => {
    const catalog = loadCatalog(SHIPPED);
    const image = catalog.find('gemforge-image-1');
    assert.equal(image?.kind, 'image');
    if (image?.kind === 'image') assert.deepEqual(image.pricing.perOutput, { '512': 2, '1024': 4, '2048': 8 });
    const music = catalog.find('gemforge-music-1');
    assert.ok(music?.kind === 'audio' && music.audio === 'music' && music.pricing.perThirtySeconds === 2);
    const text = catalog.find('gemforge-text-1');
    assert.ok(text?.kind === 'text' && text.pricing.outputPerThousandTokens === 2);
    assert.deepEqual(catalog.analysis.pricing, { inputPerThousandTokens: 0.25, outputPerThousandTokens: 1 });
    const raw = YAML.parse(fs.readFileSync(SHIPPED, 'utf8')) as { models: Array<{ id: string; capabilities: unknown }> };
    for (const listed of catalog.publicModels()) assert.deepEqual(listed.capabilities, raw.models.find((m) => m.id === listed.id)!.capabilities);
  });

  it('when a listed resolution has no price, then the load fails naming the entry and the field', () => {
    assert.throws(
      () => loadChanged((doc) => delete model(doc, 'gemforge-image-edit-1').pricing.perOutput['512']),
      /models\[1\] \(gemforge-image-edit-1\)\.pricing\.perOutput\.512 must be a number/,
    );
  });

  it('when a capability has the wrong type or a default is not listed, then the load fails naming it', () => {
    assert.throws(
      () => loadChanged((doc) => (model(doc, 'gemforge-video-1').capabilities.durations = '4')),
      /\(gemforge-video-1\)\.capabilities\.durations must be a list of numbers/,
    );
    assert.throws(
      () => loadChanged((doc) => (model(doc, 'gemforge-video-1').capabilities.defaultRatio = '4:3')),
      /\(gemforge-video-1\)\.capabilities\.defaultRatio must be one of the listed values/,
    );
    assert.throws(
      () => loadChanged((doc) => delete model(doc, 'gemforge-speech-1').capabilities.speed),
      /\(gemforge-speech-1\)\.capabilities\.speed must be an object/,
    );
  });

  it('when a token rate is missing or negative, then the load fails naming the text or analysis entry', () => {
    assert.throws(
      () => loadChanged((doc) => (model(doc, 'gemforge-text-1').pricing.inputPerThousandTokens = -1)),
      /\(gemforge-text-1\)\.pricing\.inputPerThousandTokens must be a number ≥ 0/,
    );
    assert.throws(
      () => loadChanged((doc) => delete doc.analysis.pricing.outputPerThousandTokens),
      /analysis\.pricing\.outputPerThousandTokens must be a number/,
    );
  });
});
