/**
 * A contract parameter the server accepts is one the code honours (none is
 * silently ignored): the parameter tables of domain/media-parameters.ts name exactly the
 * contract's parameters, each image parameter changes exactly the job-request
 * fields its table entry names, and each changes what is generated (real bytes).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import YAML from 'yaml';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { uploadAsset } from './helpers/uploads.ts';
import * as media from './helpers/media.ts';
import { AUDIO_PARAMETERS, IMAGE_PARAMETERS, VIDEO_PARAMETERS } from '../server/domain/media-parameters.ts';
import { prepareImage } from '../server/domain/media-image.ts';
import { prepareVideo } from '../server/domain/media-video.ts';
import { prepareAudio } from '../server/domain/media-audio.ts';
import { loadCatalog } from '../server/domain/catalog.ts';

const root = path.resolve(import.meta.dirname, '..');
const contract = YAML.parse(fs.readFileSync(path.join(root, 'openapi/openapi.yaml'), 'utf8')) as {
  components: { schemas: Record<string, { properties: Record<string, unknown> }> };
};
/** The parameters a schema takes (a `false` member is one it refuses, by name). */
const propertiesOf = (...schemas: string[]) =>
  [
    ...new Set(
      schemas.flatMap((schema) =>
        Object.entries(contract.components.schemas[schema]!.properties)
          .filter(([, s]) => s !== false)
          .map(([name]) => name),
      ),
    ),
  ].sort();

type Body = { model: string; prompt: string; parameters: Record<string, unknown> };
const BASE: Body = { model: 'gemforge-image-1', prompt: 'a lighthouse at dusk', parameters: { resolution: '512', seed: 7 } };

/** Each image parameter: two requests that differ only in it. */
function imageCases(sources: { a: string; b: string }): Record<keyof typeof IMAGE_PARAMETERS, [Body, Body]> {
  const vary = (name: string, a: unknown, b: unknown): [Body, Body] => {
    const one = structuredClone(BASE);
    const two = structuredClone(BASE);
    if (a === undefined) delete one.parameters[name];
    else one.parameters[name] = a;
    two.parameters[name] = b;
    return [one, two];
  };
  const edit = (source: string): Body => ({
    model: 'gemforge-image-edit-1',
    prompt: 'the same scene at night',
    parameters: { resolution: '512', seed: 7, sourceImage: source },
  });
  return {
    ratio: vary('ratio', '1:1', '16:9'),
    resolution: vary('resolution', '512', '1024'),
    outputCount: vary('outputCount', 1, 2),
    negativePrompt: vary('negativePrompt', undefined, 'fog, people'),
    magicPrompt: vary('magicPrompt', false, true),
    sourceImage: [edit(sources.a), edit(sources.b)],
    background: vary('background', 'opaque', 'transparent'),
    variant: vary('variant', 'standard', 'vivid'),
    style: vary('style', 'photo', 'pixel'),
    outputFormat: vary('outputFormat', 'png', 'webp'),
    seed: vary('seed', 7, 8),
  };
}

describe('media parameters', () => {
  let s: TestServer;
  let key: string;
  let accountId: string;
  let sources: { a: string; b: string };
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20' } });
    ({ secret: key, accountId } = await s.user({ gems: 100_000 }));
    const red = path.join(path.dirname(await media.image('png')), 'source-red.png');
    const blue = path.join(path.dirname(red), 'source-blue.png');
    await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 220, g: 30, b: 30 } } })
      .png()
      .toFile(red);
    await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 30, g: 60, b: 220 } } })
      .png()
      .toFile(blue);
    sources = { a: await uploadAsset(s, key, red, 'image/png'), b: await uploadAsset(s, key, blue, 'image/png') };
  });
  after(() => s.close());

  it('when the tables are read, then they name exactly the parameters the contract accepts', () => {
    assert.deepEqual(Object.keys(IMAGE_PARAMETERS).sort(), propertiesOf('MediaParametersImage'));
    assert.deepEqual(Object.keys(VIDEO_PARAMETERS).sort(), propertiesOf('MediaParametersVideo'));
    assert.deepEqual(Object.keys(AUDIO_PARAMETERS).sort(), propertiesOf('MediaParametersSpeech', 'MediaParametersMusic'));
  });

  it('when one image parameter changes, then exactly the job-request fields its table entry names change', async () => {
    const catalog = loadCatalog(s.config.catalogPath);
    const ctx = { db: s.db, catalog, accountId, scenarios: [], scenariosEnabled: true };
    for (const [name, [one, two]] of Object.entries(imageCases(sources))) {
      const a = (await prepareImage(ctx, one)).request as unknown as Record<string, unknown>;
      const b = (await prepareImage(ctx, two)).request as unknown as Record<string, unknown>;
      const changed = Object.keys(a)
        .filter((f) => JSON.stringify(a[f]) !== JSON.stringify(b[f]))
        .sort();
      const named = [...(IMAGE_PARAMETERS[name as keyof typeof IMAGE_PARAMETERS] as { sets: readonly string[] }).sets];
      assert.ok(changed.length > 0, `${name}: changes something`);
      assert.deepEqual(
        changed.filter((f) => !named.includes(f)),
        [],
        `${name}: changes only ${named.join(', ')} (changed ${changed.join(', ')})`,
      );
    }
  });

  it('when one video or audio parameter changes, then exactly the job-request fields its table entry names change', async () => {
    const catalog = loadCatalog(s.config.catalogPath);
    const ctx = { db: s.db, catalog, accountId, scenarios: [], scenariosEnabled: true };
    const frame = sources.a;
    const endFrame = sources.b;
    const video = (parameters: Record<string, unknown>) => ({
      model: 'gemforge-video-1',
      prompt: 'waves on a cliff',
      parameters: { mode: 'text-to-video', seed: 7, ...parameters },
    });
    const speech = (parameters: Record<string, unknown>) => ({
      model: 'gemforge-speech-1',
      operation: 'speech',
      prompt: 'Hello there.',
      parameters: { voiceProfileId: 'voice_72f75e56f33b8e9d6d8f4475', seed: 7, ...parameters },
    });
    const music = (parameters: Record<string, unknown>) => ({
      model: 'gemforge-music-1',
      operation: 'music',
      prompt: 'a calm song',
      parameters: { musicMode: 'advanced', seed: 7, ...parameters },
    });
    const i2v = { mode: 'image-to-video', sourceImage: frame };
    const cases: Array<[string, 'video' | 'audio', unknown, unknown]> = [
      ['mode', 'video', video({}), video(i2v)],
      ['sourceImage', 'video', video({ ...i2v }), video({ ...i2v, sourceImage: endFrame })],
      ['endFrame', 'video', video({ ...i2v }), video({ ...i2v, endFrame })],
      ['duration', 'video', video({ duration: 4 }), video({ duration: 6 })],
      ['ratio', 'video', video({ ratio: '16:9' }), video({ ratio: '1:1' })],
      ['resolution', 'video', video({ resolution: '480p' }), video({ resolution: '720p' })],
      ['audio', 'video', video({ audio: false }), video({ audio: true })],
      ['seed', 'video', video({ seed: 7 }), video({ seed: 8 })],
      ['voiceProfileId', 'audio', speech({}), speech({ voiceProfileId: 'voice_d3aaf74203c48ce692bb5225' })],
      ['speed', 'audio', speech({ speed: 1 }), speech({ speed: 1.5 })],
      ['volume', 'audio', speech({ volume: 0 }), speech({ volume: 3 })],
      ['temperature', 'audio', speech({ temperature: 0.7 }), speech({ temperature: 0.2 })],
      ['musicMode', 'audio', music({ musicMode: 'advanced' }), music({ musicMode: 'simple' })],
      ['instrumental', 'audio', music({ instrumental: 'off' }), music({ instrumental: 'on' })],
      ['style', 'audio', music({}), music({ style: 'lo-fi folk' })],
      ['title', 'audio', music({}), music({ title: 'Lanterns' })],
      ['negativeTags', 'audio', music({}), music({ negativeTags: 'drums' })],
      ['vocalGender', 'audio', music({ vocalGender: 'auto' }), music({ vocalGender: 'f' })],
      ['duration', 'audio', music({ duration: '30' }), music({ duration: '60' })],
      ['seed', 'audio', music({ seed: 7 }), music({ seed: 8 })],
    ];
    const covered = { video: new Set<string>(), audio: new Set<string>() };
    for (const [name, kind, one, two] of cases) {
      const prepare = kind === 'video' ? prepareVideo : prepareAudio;
      const a = (await prepare(ctx, one as never)).request as unknown as Record<string, unknown>;
      const b = (await prepare(ctx, two as never)).request as unknown as Record<string, unknown>;
      const changed = Object.keys(a)
        .filter((f) => JSON.stringify(a[f]) !== JSON.stringify(b[f]))
        .sort();
      const table = (kind === 'video' ? VIDEO_PARAMETERS : AUDIO_PARAMETERS) as Record<string, { sets: readonly string[] }>;
      const named = [...table[name]!.sets];
      assert.ok(
        changed.some((f) => named.includes(f)),
        `${kind} ${name}: changes one of ${named.join(', ')} (changed ${changed.join(', ') || 'nothing'})`,
      );
      // The mode decides which frame inputs apply: switching it may set the source image too.
      const allowed = name === 'mode' ? [...named, 'sourceImage'] : named;
      assert.deepEqual(
        changed.filter((f) => !allowed.includes(f)),
        [],
        `${kind} ${name}: changes only ${allowed.join(', ')} (changed ${changed.join(', ')})`,
      );
      covered[kind].add(name);
    }
    // Reference inputs (assets with their own duration rules) are covered by the video tests; every other parameter is here.
    const referenceInputs = ['referenceVideo', 'referenceVideos', 'referenceAudios', 'coverAudio'];
    assert.deepEqual(
      Object.keys(VIDEO_PARAMETERS).filter((p) => !covered.video.has(p) && !referenceInputs.includes(p)),
      [],
    );
    assert.deepEqual(
      Object.keys(AUDIO_PARAMETERS).filter((p) => !covered.audio.has(p) && !referenceInputs.includes(p)),
      [],
    );
  });

  it('when one image parameter changes, then what is generated changes (bytes, size, format or count)', async () => {
    /** The outputs of a finished task: hash, dimensions and format of each. */
    const generate = async (body: Body) => {
      const made = await submit(s, key, '/api/generate/image', body);
      assert.equal(made.status, 202, JSON.stringify(made.body));
      const task = await waitForTask(s, key, made.body.task.id);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      return Promise.all(
        task.outputs.map(async (o) => {
          const bytes = Buffer.from(await (await fetch(o.asset!.url)).arrayBuffer());
          const meta = await sharp(bytes).metadata();
          return {
            sha: crypto.createHash('sha256').update(bytes).digest('hex'),
            width: meta.width,
            height: meta.height,
            format: meta.format,
            alpha: meta.hasAlpha,
          };
        }),
      );
    };
    const cases = Object.entries(imageCases(sources));
    const outcomes = await Promise.all(cases.map(async ([name, [one, two]]) => [name, await generate(one), await generate(two)] as const));
    for (const [name, a, b] of outcomes) assert.notDeepEqual(a, b, `${name} changed nothing that was generated`);
  });
});
