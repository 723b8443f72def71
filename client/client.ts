/**
 * The gemforge client: openapi-fetch's `createClient<paths>()` over the
 * generated contract types, with the careful-client behaviour the spec asks for
 * built in (typed errors, one Idempotency-Key per logical operation reused on
 * every permitted retry, task polling, strict text streams). Browser-safe: no
 * Node imports here; file-path uploads and downloads live in uploads.ts and
 * downloads.ts.
 *
 *     const gf = createGemforgeClient({ baseUrl, apiKey });
 *     const { data, idempotencyKey } = await gf.images.create({ model: 'gemforge-image-1', prompt: 'a red fox' });
 *     const task = await gf.tasks.wait(data.task.id);
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './generated/api.ts';
import { ConnectionError, errorFromResponse, GemforgeError } from './errors.ts';
import { assertIdempotencyKey, newIdempotencyKey } from './idempotency.ts';
import { withRetries, type RetryPolicy } from './retry.ts';
import { waitForTask, type Task, type WaitOptions } from './tasks.ts';
import { ChatStream } from './chat.ts';

type Schemas = components['schemas'];
export type ModelList = Schemas['ModelList'];
export type Model = Schemas['Model'];
export type ImageRequest = Schemas['ImageRequest'];
export type VideoRequest = Schemas['VideoRequest'];
export type AudioRequest = Schemas['AudioRequest'];
export type Submission = Schemas['Submission'];
export type Asset = Schemas['Asset'];
export type Voice = Schemas['Voice'];
export type VoiceList = Schemas['VoiceList'];
export type ChatCompletionRequest = Schemas['ChatCompletionRequest'];
export type ChatCompletion = Schemas['ChatCompletion'];
export type ExtractionRequest = Schemas['ExtractionRequest'];
export type Extraction = Schemas['Extraction'];
export type { Task };

export interface GemforgeClientOptions {
  /** For example `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A personal API key (`gf_` + 64 hex), sent as `Authorization: Bearer`. */
  apiKey: string;
  /** A fetch to use instead of `globalThis.fetch` (tests, proxies, logging). */
  fetch?: typeof globalThis.fetch;
  /** Retry policy of spending calls (see retry.ts). */
  retry?: RetryPolicy;
}

/** Options of a spending call (image, video, audio, text, extraction). */
export interface SpendOptions {
  /** The identity of this logical operation; generated when absent. Pass the one of an earlier attempt to replay it. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  retry?: RetryPolicy;
}

/** The answer of a spending call, with the identity that was used (keep it: replays need it). */
export interface Spent<T> {
  data: T;
  idempotencyKey: string;
  /** HTTP status: 202 new media work, 200 replay or text/extraction. */
  status: number;
  requestId: string | undefined;
}

/** A browser `Blob`/`File`, bytes, or a WHATWG stream. */
export type UploadBody = Blob | ArrayBuffer | Uint8Array | ReadableStream<Uint8Array>;

export interface AssetUploadOptions {
  /** `image/png`, `video/mp4`, `audio/mpeg` …; must match the bytes. */
  contentType: string;
  /** Sent as `X-Filename` (metadata only). */
  filename?: string;
  signal?: AbortSignal;
}

export interface VoiceUploadInput {
  /** The recording: MP3, WAV, OGG, M4A, AAC, FLAC or WebM. */
  file: Blob;
  /** The file name sent in the multipart part. */
  filename?: string;
  /** Recording length in seconds, 15–300. */
  duration: number | string;
  /** Sent only after the speaker's permission is confirmed. */
  rightsConfirmed: true;
  signal?: AbortSignal;
}

type Result<T> = { data?: T; error?: unknown; response: Response };

const isAbort = (e: unknown) => e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');

/** Runs one HTTP exchange; a non-2xx answer becomes a typed error, no answer a ConnectionError. */
async function exchange<T>(run: () => Promise<Result<T>>, idempotencyKey?: string): Promise<{ data: T; response: Response }> {
  let result: Result<T>;
  try {
    result = await run();
  } catch (cause) {
    if (isAbort(cause)) throw cause;
    throw new ConnectionError({ message: `No complete answer from the server: ${(cause as Error)?.message ?? cause}`, cause, idempotencyKey });
  }
  if (!result.response.ok) throw errorFromResponse(result.response, result.error, idempotencyKey);
  return { data: result.data as T, response: result.response };
}

/** Header values must be ByteStrings: non-ASCII file names are percent-encoded. */
const headerSafe = (name: string) => (/^[\x20-\x7e]*$/.test(name) ? name : encodeURIComponent(name));

export function createGemforgeClient(options: GemforgeClientOptions) {
  const userFetch = options.fetch;
  const raw: Client<paths> = createClient<paths>({
    baseUrl: options.baseUrl,
    headers: { Authorization: `Bearer ${options.apiKey}` },
    // openapi-fetch calls fetch(request); a caller's fetch is called late-bound so wrappers can count.
    fetch: (request: Request) => (userFetch ?? globalThis.fetch)(request),
  });

  /** One logical spending operation: one identity, reused on every permitted retry. */
  async function spend<T>(opts: SpendOptions, send: (key: string) => Promise<Result<T>>): Promise<Spent<T>> {
    const idempotencyKey = opts.idempotencyKey ?? newIdempotencyKey();
    assertIdempotencyKey(idempotencyKey);
    const { data, response } = await withRetries(idempotencyKey, opts.retry ?? options.retry, opts.signal, () =>
      exchange(() => send(idempotencyKey), idempotencyKey),
    );
    return { data, idempotencyKey, status: response.status, requestId: response.headers.get('x-request-id') ?? undefined };
  }

  async function getTask(id: string, signal?: AbortSignal): Promise<Task> {
    const { data } = await exchange(() => raw.GET('/api/generate/tasks/{id}', { params: { path: { id } }, signal }));
    return data.task;
  }

  return {
    /** The underlying typed openapi-fetch client, for anything not wrapped here. */
    raw,

    models: {
      /** GET /api/generate/models: discovery (not a quote). */
      async list(init: { signal?: AbortSignal } = {}): Promise<ModelList> {
        return (await exchange(() => raw.GET('/api/generate/models', { signal: init.signal }))).data;
      },
    },

    images: {
      /** POST /api/generate/image: a new media task (202) or the replayed one (200). */
      create(body: ImageRequest, opts: SpendOptions = {}): Promise<Spent<Submission>> {
        return spend(opts, (key) => raw.POST('/api/generate/image', { body, params: { header: { 'Idempotency-Key': key } }, signal: opts.signal }));
      },
    },

    videos: {
      /** POST /api/generate/video. Set `parameters.mode` explicitly. */
      create(body: VideoRequest, opts: SpendOptions = {}): Promise<Spent<Submission>> {
        return spend(opts, (key) => raw.POST('/api/generate/video', { body, params: { header: { 'Idempotency-Key': key } }, signal: opts.signal }));
      },
    },

    audio: {
      /** POST /api/generate/audio: `operation` is `speech`, `voice_clone` or `music`. */
      create(body: AudioRequest, opts: SpendOptions = {}): Promise<Spent<Submission>> {
        return spend(opts, (key) => raw.POST('/api/generate/audio', { body, params: { header: { 'Idempotency-Key': key } }, signal: opts.signal }));
      },
    },

    tasks: {
      /** GET /api/generate/tasks/{id}: a snapshot with fresh signed output URLs. */
      get: getTask,
      /** HEAD /api/generate/tasks/{id}: true when the task exists and is readable; false on 404. */
      async exists(id: string, init: { signal?: AbortSignal } = {}): Promise<boolean> {
        try {
          await exchange(() => raw.HEAD('/api/generate/tasks/{id}', { params: { path: { id } }, signal: init.signal }));
          return true;
        } catch (error) {
          if (error instanceof GemforgeError && error.status === 404) return false;
          throw error;
        }
      },
      /** Polls until terminal (2, 4, 8, then 15 s with jitter); throws TaskWaitTimeout with the ID when the wait ends first. */
      wait(id: string, opts: WaitOptions = {}): Promise<Task> {
        return waitForTask(getTask, id, opts);
      },
    },

    assets: {
      /** POST /api/generate/assets: raw bytes (no idempotency; never retried automatically). */
      async upload(bytes: UploadBody, opts: AssetUploadOptions): Promise<Asset> {
        const header: { 'X-Filename'?: string } = {};
        if (opts.filename) header['X-Filename'] = headerSafe(opts.filename.slice(0, 255));
        const { data } = await exchange(() =>
          raw.POST('/api/generate/assets', {
            // `format: binary` is typed as string; the serializer passes the bytes through untouched.
            body: bytes as unknown as string,
            bodySerializer: (b: unknown) => b,
            headers: { 'Content-Type': opts.contentType },
            params: { header },
            signal: opts.signal,
            ...(typeof ReadableStream !== 'undefined' && bytes instanceof ReadableStream ? { duplex: 'half' } : {}),
          }),
        );
        return data.asset;
      },
    },

    voices: {
      /** GET /api/generate/voices: `mine` (default) or `explore`, 50 per page; `model` keeps only the voices that speech model can speak with. */
      async list(
        query: { scope?: 'mine' | 'explore'; page?: number; language?: string; model?: string } = {},
        init: { signal?: AbortSignal } = {},
      ): Promise<VoiceList> {
        return (await exchange(() => raw.GET('/api/generate/voices', { params: { query }, signal: init.signal }))).data;
      },
      /** POST /api/generate/voices: multipart `file`, `duration`, `rightsConfirmed` (no idempotency; never retried). */
      async create(input: VoiceUploadInput): Promise<Voice> {
        const { data } = await exchange(() =>
          raw.POST('/api/generate/voices', {
            body: { file: '', duration: String(input.duration), rightsConfirmed: 'true' },
            bodySerializer: () => {
              const form = new FormData();
              form.append('file', input.file, input.filename ?? 'voice');
              form.append('duration', String(input.duration));
              form.append('rightsConfirmed', 'true');
              return form;
            },
            signal: input.signal,
          }),
        );
        return data.voice;
      },
    },

    chat: {
      completions: {
        /** POST …/chat/completions without streaming: the JSON completion. */
        create(body: ChatCompletionRequest & { stream?: false }, opts: SpendOptions = {}): Promise<Spent<ChatCompletion>> {
          return spend(opts, async (key) => {
            const result = await raw.POST('/api/generate/text/v1/chat/completions', {
              body,
              params: { header: { 'Idempotency-Key': key } },
              signal: opts.signal,
            });
            return result as Result<ChatCompletion>;
          });
        },
        /**
         * POST …/chat/completions with `stream: true`. Resolves once the stream
         * starts (the request itself is retried like any spending call); the
         * returned ChatStream throws StreamError on an error frame or a missing [DONE].
         */
        async stream(body: Omit<ChatCompletionRequest, 'stream'>, opts: SpendOptions = {}): Promise<ChatStream> {
          const started = await spend(opts, async (key) => {
            const result = await raw.POST('/api/generate/text/v1/chat/completions', {
              body: { ...body, stream: true },
              params: { header: { 'Idempotency-Key': key } },
              parseAs: 'stream',
              signal: opts.signal,
            });
            return result as Result<ReadableStream<Uint8Array>>;
          });
          return new ChatStream(started.data, started.idempotencyKey, started.requestId, opts.signal);
        },
      },
    },

    extract: {
      /** POST /api/generate/extract/video: synchronous analysis of an owned, ready video asset. */
      video(body: ExtractionRequest, opts: SpendOptions = {}): Promise<Spent<Extraction>> {
        return spend(opts, (key) => raw.POST('/api/generate/extract/video', { body, params: { header: { 'Idempotency-Key': key } }, signal: opts.signal }));
      },
    },
  };
}

export type GemforgeClient = ReturnType<typeof createGemforgeClient>;
