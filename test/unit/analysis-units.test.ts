/** Video-analysis pieces on their own: pricing, parsing a provider's answer, the local analyzer's measurements and scenes. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import fc from 'fast-check';
import { conservativeMaximum, measuredCharge, parseExtraction, RESERVED_INPUT_TOKENS, RESERVED_OUTPUT_TOKENS } from '../../server/domain/extract.ts';
import { loadCatalog } from '../../server/domain/catalog.ts';
import { MAX_SAMPLES, parseSceneLog, sampleFps, sampleSize, splitFrames } from '../../server/providers/analysis/decode.ts';
import { colourName, dominantColours, frameDifference, laplacianVariance, luma, motionLevel, colourCounts } from '../../server/providers/analysis/measures.ts';
import { keptCuts, MAX_SCENES, suggestedFrames, buildScenes } from '../../server/providers/analysis/scenes.ts';
import { localUsage } from '../../server/providers/analysis/local.ts';

const catalog = loadCatalog(path.join(import.meta.dirname, '../../server/catalog/models.yaml'));
const rates = catalog.analysis.pricing;

describe('extraction pricing', () => {
  it('when quoting at the catalog rates, then the reservation is ceil((262,144 × 0.25 + 8,192 × 1) / 1000) = 74 Gems', () => {
    assert.equal(conservativeMaximum(rates), 74);
    assert.equal(conservativeMaximum({ inputPerThousandTokens: 0, outputPerThousandTokens: 0 }), 1);
  });

  it('when any usage is measured, then its charge is a whole number never above the reservation', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        (input, output, inRate, outRate) => {
          const r = { inputPerThousandTokens: inRate, outputPerThousandTokens: outRate };
          const reserved = conservativeMaximum(r);
          const charge = measuredCharge(r, { inputTokens: input, outputTokens: output }, reserved);
          assert.ok(Number.isSafeInteger(charge) && charge >= 0 && charge <= reserved);
          if (input <= RESERVED_INPUT_TOKENS && output <= RESERVED_OUTPUT_TOKENS) {
            assert.ok(charge >= Math.ceil((input * inRate + output * outRate) / 1000 - 1e-9) || charge === reserved);
          }
        },
      ),
    );
  });

  it('when the local analyzer reports its worst case (240 frames, 120 s of audio, a 2,000-character prompt), then the input stays within 262,144 tokens', () => {
    const prompt = '🌋'.repeat(1000); // 2,000 UTF-16 characters, many tokens
    const usage = localUsage(MAX_SAMPLES + 1, 119.99, true, prompt, '');
    assert.ok(usage.inputTokens <= RESERVED_INPUT_TOKENS, String(usage.inputTokens));
    assert.equal(localUsage(24, 6, false, '', '{}').inputTokens, 24 * 258 + 64);
    assert.equal(localUsage(24, 5.5, true, '', '').inputTokens, 24 * 258 + 6 * 32 + 64);
  });
});

describe('parsing a provider answer', () => {
  it('when the answer is not JSON or misses or mistypes a field, then it is malformed', () => {
    for (const text of [
      '',
      '{"analysis": "x", "durationSeconds": 3, "frames": [',
      '[]',
      '{"durationSeconds": 3, "frames": []}',
      '{"analysis": "x", "frames": []}',
      '{"analysis": "x", "durationSeconds": -1, "frames": []}',
      '{"analysis": "x", "durationSeconds": 3}',
      '{"analysis": "x", "durationSeconds": 3, "frames": [{"timeSeconds": "1", "reason": "sharpest"}]}',
      '{"analysis": "x", "durationSeconds": 3, "frames": [{"timeSeconds": 1, "reason": "best"}]}',
      '{"analysis": "x", "durationSeconds": 3, "frames": [], "segments": {}}',
      '{"analysis": "x", "durationSeconds": 3, "frames": [], "segments": [{"startSeconds": 0, "endSeconds": 1}]}',
    ]) {
      assert.equal(parseExtraction(text), undefined, text);
    }
  });

  it('when frames are out of range, duplicated or unordered, then they are dropped, deduplicated and sorted; scores clamped', () => {
    const x = parseExtraction(
      JSON.stringify({
        analysis: 'a',
        durationSeconds: 5,
        frames: [
          { timeSeconds: 4, reason: 'sharpest', score: 1.5 },
          { timeSeconds: -0.1, reason: 'scene_start' },
          { timeSeconds: 1.0004, reason: 'scene_start', score: 0.5 },
          { timeSeconds: 1, reason: 'representative' },
          { timeSeconds: 5.1, reason: 'sharpest' },
          { timeSeconds: 5, reason: 'representative' },
        ],
      }),
    );
    assert.deepEqual(x, {
      analysis: 'a',
      durationSeconds: 5,
      frames: [
        { timeSeconds: 1, reason: 'scene_start', score: 0.5 },
        { timeSeconds: 4, reason: 'sharpest', score: 1 },
        { timeSeconds: 5, reason: 'representative' },
      ],
    });
    assert.ok(!('segments' in x), 'no segments key when the answer had none');
  });

  it('when segments overlap, run past the end or come unordered, then they are clamped, ordered and made disjoint', () => {
    const x = parseExtraction(
      JSON.stringify({
        analysis: 'a',
        durationSeconds: 6,
        frames: [],
        segments: [
          { startSeconds: 3, endSeconds: 9, description: 'c' },
          { startSeconds: 0, endSeconds: 2, description: 'a' },
          { startSeconds: 1.5, endSeconds: 3.5, description: 'b' },
          { startSeconds: 2.5, endSeconds: 3, description: 'swallowed' },
        ],
      }),
    );
    assert.deepEqual(x?.segments, [
      { startSeconds: 0, endSeconds: 2, description: 'a' },
      { startSeconds: 2, endSeconds: 3.5, description: 'b' },
      { startSeconds: 3.5, endSeconds: 6, description: 'c' },
    ]);
  });
});

describe('local analyzer measurements', () => {
  const solid = (w: number, h: number, rgb: [number, number, number]) => {
    const b = Buffer.alloc(w * h * 3);
    for (let i = 0; i < w * h; i++) b.set(rgb, i * 3);
    return b;
  };
  const checker = (w: number, h: number) => {
    const b = Buffer.alloc(w * h * 3);
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) b.fill((x + y) % 2 ? 255 : 0, (y * w + x) * 3, (y * w + x) * 3 + 3);
    return b;
  };

  it('when pixels are primary or neutral colours, then they get plain names', () => {
    assert.equal(colourName(255, 0, 0), 'red');
    assert.equal(colourName(0, 128, 0), 'green');
    assert.equal(colourName(0, 0, 255), 'blue');
    assert.equal(colourName(255, 255, 0), 'yellow');
    assert.equal(colourName(0, 0, 0), 'black');
    assert.equal(colourName(255, 255, 255), 'white');
    assert.equal(colourName(128, 128, 128), 'grey');
    assert.equal(colourName(255, 140, 0), 'orange');
  });

  it('when a frame is flat, then its Laplacian variance is 0; a checkerboard is sharp', () => {
    assert.equal(laplacianVariance(luma(solid(16, 9, [40, 90, 200])), 16, 9), 0);
    assert.ok(laplacianVariance(luma(checker(16, 9)), 16, 9) > 1000);
  });

  it('when frames differ, then the difference and the motion word follow', () => {
    const a = luma(solid(8, 8, [0, 0, 0]));
    const b = luma(solid(8, 8, [255, 255, 255]));
    assert.equal(frameDifference(a, a), 0);
    assert.ok(Math.abs(frameDifference(a, b) - 1) < 1e-6);
    assert.equal(motionLevel(0), 'static');
    assert.equal(motionLevel(0.01), 'low');
    assert.equal(motionLevel(0.05), 'moderate');
    assert.equal(motionLevel(0.3), 'high');
  });

  it('when counting colours, then the dominant ones come largest first with shares', () => {
    const counts = colourCounts([solid(4, 4, [255, 0, 0]), solid(4, 4, [255, 0, 0]), solid(4, 4, [0, 0, 255])], 1);
    assert.deepEqual(
      dominantColours(counts).map((c) => [c.name, Math.round(c.share * 100)]),
      [
        ['red', 67],
        ['blue', 33],
      ],
    );
  });

  it('when ffmpeg prints scene metadata, then cuts and scores are read from it', () => {
    const log = 'frame:0    pts:25600   pts_time:2\nlavfi.scene_score=1.000000\nframe:1    pts:57856   pts_time:4.52\nlavfi.scene_score=0.412000\n';
    assert.deepEqual(parseSceneLog(log), [
      { timeSeconds: 2, score: 1 },
      { timeSeconds: 4.52, score: 0.412 },
    ]);
    assert.deepEqual(parseSceneLog(''), []);
  });

  it('when sampling, then short videos get 4 fps, long ones at most 240 frames, and sample sizes keep the aspect', () => {
    assert.equal(sampleFps(6), 4);
    assert.ok(sampleFps(119.9) * 119.9 <= MAX_SAMPLES);
    assert.deepEqual(sampleSize(1920, 1080), { width: 128, height: 72 });
    assert.deepEqual(sampleSize(1080, 1920), { width: 72, height: 128 });
    assert.deepEqual(sampleSize(null, null), { width: 128, height: 72 });
    assert.equal(splitFrames(Buffer.alloc(3 * 4 * 3 * 2 + 5), 4, 3).length, 2);
  });

  it('when cuts are too close together or to the end, then they merge; beyond 50 scenes the strongest cuts win', () => {
    const kept = keptCuts(
      [
        { timeSeconds: 0.2, score: 1 },
        { timeSeconds: 2, score: 0.9 },
        { timeSeconds: 2.1, score: 0.95 },
        { timeSeconds: 5.9, score: 1 },
      ],
      6,
    );
    assert.deepEqual(kept, [{ timeSeconds: 2, score: 0.9 }]);
    const many = Array.from({ length: 100 }, (_, i) => ({ timeSeconds: (i + 1) * 0.5, score: i % 2 ? 0.9 : 0.4 }));
    const strongest = keptCuts(many, 60);
    assert.equal(strongest.length, MAX_SCENES - 1);
    assert.ok(strongest.every((c) => c.score === 0.9));
    assert.deepEqual(
      strongest.map((c) => c.timeSeconds),
      [...strongest.map((c) => c.timeSeconds)].sort((a, b) => a - b),
    );
  });

  it('when scenes are built from samples, then suggested frames are unique, in order and inside their scenes', () => {
    const fps = 4;
    const frames = [...Array.from({ length: 8 }, () => solid(16, 8, [255, 0, 0])), ...Array.from({ length: 8 }, () => checker(16, 8))];
    const scenes = buildScenes([{ timeSeconds: 2, score: 0.8 }], { fps, width: 16, height: 8, frames }, 4);
    assert.equal(scenes.length, 2);
    assert.deepEqual([scenes[0].startSeconds, scenes[0].endSeconds, scenes[1].startSeconds, scenes[1].endSeconds], [0, 2, 2, 4]);
    assert.equal(scenes[0].colours[0].name, 'red');
    assert.equal(scenes[0].pick?.reason, 'representative');
    assert.equal(scenes[1].pick?.reason, 'sharpest');
    const suggested = suggestedFrames(scenes);
    const times = suggested.map((f) => f.timeSeconds);
    assert.deepEqual(
      times,
      [...new Set(times)].sort((a, b) => a - b),
    );
    assert.deepEqual(
      suggested.filter((f) => f.reason === 'scene_start'),
      [
        { timeSeconds: 0, reason: 'scene_start', score: 1 },
        { timeSeconds: 2, reason: 'scene_start', score: 0.8 },
      ],
    );
  });
});
