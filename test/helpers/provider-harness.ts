/**
 * How the conformance suite (test/provider-conformance.test.ts) drives each
 * registered remote provider: its fake, a server configured for it, a request
 * its model takes, and the routes a fault goes on. A new provider registers
 * its descriptor (server/providers/remote/index.ts) and a harness here, and
 * gets the whole fault matrix; the suite fails for a descriptor without one.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { dropDatabaseFor } from './database.ts';
import { startTestServer, tempDataDir, type TestServer } from './server.ts';
import {
  startFakeFal,
  startFakeOpenAiImages,
  startFakeOpenAiSpeech,
  startFakeReplicate,
  type FakeFal,
  type FakeOpenAiImages,
  type FakeOpenAiSpeech,
  type FakeReplicate,
  type FakeUpstream,
} from './fake-upstreams.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The fakes serve outputs from loopback: allowed, as an operator allows a private upstream. */
export const LOOPBACK_FETCH = { REMOTE_FETCH_ALLOW: '127.0.0.0/8' };
export const UPSTREAM_KEY = 'sk-upstream-secret-do-not-leak';
export const SAWYER = 'voice_216a51c833b48d5464b520f3';

/** The shipped catalog with `edit` applied to the models it names, written to `dir`. */
export function catalogWith(dir: string, edit: Record<string, (m: Record<string, unknown>) => void>): string {
  const doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'server/catalog/models.yaml'), 'utf8')) as { models: Array<Record<string, unknown>> };
  for (const m of doc.models) edit[m.id as string]?.(m);
  const file = path.join(dir, `models-${Object.keys(edit).join('-') || 'shipped'}.yaml`);
  fs.writeFileSync(file, YAML.stringify(doc));
  return file;
}

/** The shipped catalog with the video and music models moved to Replicate-shaped predictions. */
export function remoteCatalog(dir: string): string {
  return catalogWith(dir, {
    'gemforge-video-1': (m) => {
      m.provider = 'replicate';
      m.replicate = {
        model: 'acme/video-gen',
        input: { prompt: '{prompt}', duration: '{duration}', aspect_ratio: '{ratio}', fps: 24, note: 'made for {mode}' },
      };
    },
    'gemforge-music-1': (m) => {
      m.provider = 'replicate';
      m.replicate = {
        version: '80f189984e5ca70287d13342f6daa0db45cba3c131c4e46dc81360f3a4c4f690',
        input: { prompt: '{prompt}', duration: '{durationSeconds}' },
      };
    },
  });
}

/** One provider under test: its fake and a server using it. */
export interface Rig<F extends FakeUpstream = FakeUpstream> {
  fake: F;
  t: TestServer;
  /** Starts another server on the same installation and fake (a restart after a crash). */
  restart(): Promise<TestServer>;
  close(): Promise<void>;
}

export interface ProviderHarness<F extends FakeUpstream = FakeUpstream> {
  /** The descriptor's name. */
  provider: string;
  /** Jobs are created then read (a prediction) rather than answered in one call. */
  async: boolean;
  /** Starts the fake and a server whose model uses it (`env` overrides; `slow`: the upstream job never finishes by itself). */
  start(env?: Record<string, string>, options?: { slow?: boolean }): Promise<Rig<F>>;
  /** The creating call's route, for faults. */
  create: string;
  /** The route whose media faults spoil the output (the create itself for answers carrying the bytes). */
  media: string;
  /** The read of an asynchronous job. */
  read?: string;
  /** The submission's path and a body its model takes. */
  path: string;
  request(prompt: string): Record<string, unknown>;
  /** Jobs the upstream made (work it did, and would bill). */
  jobs(fake: F): number;
  /** Jobs cancelled upstream. */
  canceled?(fake: F): number;
  /** Ends every running upstream job as it would end by itself. */
  finishAll?(fake: F): void;
  /** A prompt the fake refuses under its content policy, where it models one. */
  contentPolicyPrompt?: string;
}

/** Starts a server for `fake` on `dataDir` (kept across a restart). */
function rigOf<F extends FakeUpstream>(fake: F, env: Record<string, string>, cleanup: () => void = () => undefined): Promise<Rig<F>> {
  const dataDir = tempDataDir();
  const servers: TestServer[] = [];
  const start = async () => {
    const t = await startTestServer({ dataDir, env: { WORKER_POLL_MS: '20', ...env } });
    servers.push(t);
    return t;
  };
  return start().then((t) => ({
    fake,
    t,
    restart: start,
    async close() {
      // A server the test stopped already (a restart) is stopped again harmlessly.
      for (const s of servers) await s.close().catch(() => undefined);
      await fake.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
      await dropDatabaseFor(dataDir);
      cleanup();
    },
  }));
}

const images: ProviderHarness<FakeOpenAiImages> = {
  provider: 'openai-images',
  async: false,
  async start(env = {}) {
    const fake = await startFakeOpenAiImages({ apiKey: UPSTREAM_KEY });
    return rigOf(fake, { IMAGE_UPSTREAM_URL: fake.url, IMAGE_UPSTREAM_API_KEY: UPSTREAM_KEY, IMAGE_UPSTREAM_MODELS: 'gemforge-image-1=gpt-image-1', ...env });
  },
  create: 'POST /v1/images/generations',
  media: 'POST /v1/images/generations',
  path: '/api/generate/image',
  request: (prompt) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } }),
  jobs: (fake) => fake.generations(),
  contentPolicyPrompt: 'a content-policy test',
};

const speech: ProviderHarness<FakeOpenAiSpeech> = {
  provider: 'openai-speech',
  async: false,
  async start(env = {}) {
    const fake = await startFakeOpenAiSpeech({ apiKey: UPSTREAM_KEY });
    return rigOf(fake, {
      SPEECH_UPSTREAM_URL: fake.url,
      SPEECH_UPSTREAM_API_KEY: UPSTREAM_KEY,
      SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
      SPEECH_UPSTREAM_VOICES: `${SAWYER}=onyx`,
      ...env,
    });
  },
  create: 'POST /v1/audio/speech',
  media: 'POST /v1/audio/speech',
  path: '/api/generate/audio',
  request: (prompt) => ({ model: 'gemforge-speech-1', operation: 'speech', prompt, parameters: { voiceProfileId: SAWYER } }),
  jobs: (fake) => fake.syntheses(),
};

const replicate: ProviderHarness<FakeReplicate> = {
  provider: 'replicate',
  async: true,
  async start(env = {}, options = {}) {
    const fake = await startFakeReplicate({ apiKey: UPSTREAM_KEY, processingMs: options.slow ? Infinity : 200 });
    const dir = tempDataDir();
    return rigOf(
      fake,
      { ...LOOPBACK_FETCH, CATALOG_PATH: remoteCatalog(dir), REPLICATE_API_URL: fake.url, REPLICATE_API_TOKEN: UPSTREAM_KEY, REPLICATE_POLL_MS: '50', ...env },
      () => fs.rmSync(dir, { recursive: true, force: true }),
    );
  },
  create: 'POST /v1/models/{owner}/{name}/predictions',
  read: 'GET /v1/predictions/{id}',
  media: 'GET /files/{name}',
  path: '/api/generate/video',
  request: (prompt) => ({ model: 'gemforge-video-1', prompt, parameters: { mode: 'text-to-video', duration: 2, resolution: '480p' } }),
  jobs: (fake) => fake.predictions().length,
  canceled: (fake) => fake.predictions().filter((p) => p.status === 'canceled').length,
  finishAll: (fake) => fake.predictions().forEach((p) => fake.finish(p.id)),
  contentPolicyPrompt: 'a content-policy test',
};

/** The shipped catalog with the image model moved to a fal queue model. */
export function falCatalog(dir: string): string {
  return catalogWith(dir, {
    'gemforge-image-1': (m) => {
      m.provider = 'fal';
      m.fal = { model: 'fal-ai/flux/dev', input: { prompt: '{prompt}', seed: '{seed}', num_images: 1, output_format: 'png' } };
    },
  });
}

const fal: ProviderHarness<FakeFal> = {
  provider: 'fal',
  async: true,
  async start(env = {}, options = {}) {
    const fake = await startFakeFal({ apiKey: UPSTREAM_KEY, processingMs: options.slow ? Infinity : 200 });
    const dir = tempDataDir();
    return rigOf(fake, { ...LOOPBACK_FETCH, CATALOG_PATH: falCatalog(dir), FAL_QUEUE_URL: fake.url, FAL_KEY: UPSTREAM_KEY, FAL_POLL_MS: '50', ...env }, () =>
      fs.rmSync(dir, { recursive: true, force: true }),
    );
  },
  create: 'POST /{owner}/{alias}/{path}',
  read: 'GET /{owner}/{alias}/requests/{id}/status',
  media: 'GET /files/{name}',
  path: '/api/generate/image',
  request: (prompt) => ({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } }),
  jobs: (fake) => fake.submitted().length,
  canceled: (fake) => fake.submitted().filter((q) => q.canceled).length,
  finishAll: (fake) => fake.completeAll(),
};

/** The harness of each registered provider, by its descriptor's name. */
export const HARNESSES: ReadonlyMap<string, ProviderHarness> = new Map<string, ProviderHarness>(
  ([images, speech, replicate, fal] as unknown as ProviderHarness[]).map((h) => [h.provider, h]),
);
