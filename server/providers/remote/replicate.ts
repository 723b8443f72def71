/**
 * Any kind through an asynchronous prediction API in Replicate's HTTP shape:
 * create a prediction (`POST /v1/models/{owner}/{name}/predictions`, or
 * `POST /v1/predictions` with a version), read it (`GET /v1/predictions/{id}`)
 * until `succeeded`, `failed` or `canceled`; outputs are URLs, downloaded here.
 *
 * Exactly once: the slot is marked `calling` before the create request and
 * the prediction id is recorded as soon as it answers; a resumed job reads that
 * prediction instead of creating another. A create request that was sent and
 * lost (no id came back) cannot be looked up: the task is held for an
 * operator. A prediction still running at the deadline is cancelled upstream
 * and the slot fails (nothing charged).
 *
 * A catalog entry maps the public request onto the model's `input`:
 *   replicate:
 *     model: owner/name          (or version: <id>)
 *     input:
 *       prompt: '{prompt}'        a string with {field} placeholders of the job request,
 *       duration: '{duration}'    a lone placeholder keeps the field's type (number, boolean)
 *       fps: 24                   literals pass as they are
 * checked at start: an unknown field stops the start naming the model.
 */
import { MediaGenerationError, MediaHoldError, type GeneratedOutput, type JobRequests, type MediaJob, type MediaKind, type MediaProvider, type MediaTools } from '../media-types.ts';
import { readJsonBounded } from './body.ts';
import { baseOf, callUpstream } from './http.ts';
import { downloadOutput } from './output.ts';
import type { FetchAllow } from './public-fetch.ts';

export interface ReplicateEntry {
  /** `owner/name` of an official model, or a version id (`POST /v1/predictions`). */
  model?: string;
  version?: string;
  input: Record<string, unknown>;
}

export interface ReplicateOptions {
  url: string;
  token: string | undefined;
  pollMs: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  /** Private addresses an output URL may point at (`REMOTE_FETCH_ALLOW`). */
  fetchAllow: FetchAllow;
}

/** The fields a placeholder may name, per kind (the job request's own fields). */
export const REQUEST_FIELDS: Record<MediaKind, readonly string[]> = {
  image: ['prompt', 'negativePrompt', 'ratio', 'resolution', 'width', 'height', 'outputCount', 'background', 'variant', 'style', 'outputFormat', 'magicPrompt', 'seed'],
  video: ['prompt', 'mode', 'duration', 'ratio', 'resolution', 'width', 'height', 'fps', 'audio', 'seed'],
  audio: ['prompt', 'text', 'operation', 'musicMode', 'instrumental', 'style', 'title', 'negativeTags', 'vocalGender', 'durationSeconds', 'speed', 'volume', 'temperature', 'seed'],
};

const PLACEHOLDER = /\{([A-Za-z]+)\}/g;

/** Checks a catalog entry's `replicate` block; throws a message naming `where`. */
export function parseReplicateEntry(raw: unknown, kind: MediaKind, where: string): ReplicateEntry {
  const r = raw as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null) throw new Error(`${where}: provider replicate needs a "replicate" mapping (model or version, and input)`);
  const model = r.model;
  const version = r.version;
  if (model !== undefined && (typeof model !== 'string' || !/^[\w.-]+\/[\w.-]+$/.test(model))) throw new Error(`${where}: replicate.model must look like owner/name`);
  if (version !== undefined && (typeof version !== 'string' || !/^[\w.:/-]{1,200}$/.test(version))) throw new Error(`${where}: replicate.version must be a version id`);
  if ((model === undefined) === (version === undefined)) throw new Error(`${where}: replicate needs exactly one of model and version`);
  const input = r.input;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new Error(`${where}: replicate.input must map the model's input names to values`);
  for (const [name, value] of Object.entries(input)) {
    if (typeof value === 'string') {
      for (const m of value.matchAll(PLACEHOLDER)) {
        if (!REQUEST_FIELDS[kind].includes(m[1]!)) throw new Error(`${where}: replicate.input.${name} names {${m[1]}}, which a ${kind} request does not have (known: ${REQUEST_FIELDS[kind].join(', ')})`);
      }
    } else if (!['number', 'boolean'].includes(typeof value) && value !== null) {
      throw new Error(`${where}: replicate.input.${name} must be a string, number, boolean or null`);
    }
  }
  return { ...(model !== undefined && { model: model as string }), ...(version !== undefined && { version: version as string }), input: input as Record<string, unknown> };
}

/** The prediction input for a job request: placeholders filled, a lone placeholder keeping its type; null fields left out. */
export function inputFor(entry: ReplicateEntry, request: JobRequests[MediaKind]): Record<string, unknown> {
  const fields = request as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(entry.input)) {
    if (typeof value !== 'string') {
      out[name] = value;
      continue;
    }
    const lone = /^\{([A-Za-z]+)\}$/.exec(value);
    if (lone) {
      const v = fields[lone[1]!];
      if (v !== null && v !== undefined) out[name] = v;
      continue;
    }
    out[name] = value.replace(PLACEHOLDER, (_, f: string) => String(fields[f] ?? ''));
  }
  return out;
}

interface Prediction {
  id?: unknown;
  status?: unknown;
  output?: unknown;
  error?: unknown;
}

const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);
/** The largest prediction answer read (its logs can run to hundreds of kilobytes). */
const PREDICTION_MAX_BYTES = 4 * 1024 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class ReplicateProvider<K extends MediaKind> implements MediaProvider<K> {
  readonly name = 'replicate';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  private readonly who: string;
  constructor(
    private readonly kind: K,
    private readonly entry: ReplicateEntry,
    private readonly options: ReplicateOptions,
  ) {
    this.base = baseOf(options.url);
    this.who = `The ${kind} provider`;
  }

  private headers(): Record<string, string> {
    return { 'content-type': 'application/json', ...(this.options.token && { authorization: `Bearer ${this.options.token}` }) };
  }

  private call(path: string, init: RequestInit, tools: MediaTools, replayable: boolean): Promise<Response> {
    return callUpstream((signal) => fetch(`${this.base}${path}`, { ...init, headers: this.headers(), signal }), {
      who: this.who,
      provider: this.name,
      deadlineMs: this.options.attemptTimeoutMs * 3,
      attemptTimeoutMs: this.options.attemptTimeoutMs,
      replayable,
      stopping: tools.stopping,
      signal: tools.signal,
    });
  }

  private async read(response: Response, tools: MediaTools, slot: number): Promise<Prediction> {
    // Bounded while read: a prediction (its input, logs and output URLs) is small; a huge answer fails the read.
    const body = (await readJsonBounded(response, PREDICTION_MAX_BYTES, this.who).catch(() => undefined)) as Prediction | undefined;
    if (typeof body !== 'object' || body === null || typeof body.status !== 'string') {
      tools.warn({ slot, upstreamRequestId: response.headers.get('x-request-id') ?? undefined }, 'prediction answer malformed');
      throw new MediaGenerationError('GENERATION_FAILED', `${this.who} returned a malformed answer; nothing was charged for this output.`);
    }
    return body;
  }

  /** Creates the slot's prediction, its id recorded before anything waits on it. */
  private async create(job: MediaJob<K>, tools: MediaTools): Promise<string> {
    const input = inputFor(this.entry, job.request);
    const [path, body] = this.entry.model
      ? [`/v1/models/${this.entry.model}/predictions`, { input }]
      : ['/v1/predictions', { version: this.entry.version, input }];
    await tools.remoteCalls.calling(job.index, this.name);
    const prediction = await this.read(await this.call(path, { method: 'POST', body: JSON.stringify(body) }, tools, false), tools, job.index);
    if (typeof prediction.id !== 'string' || prediction.id === '') {
      throw new MediaGenerationError('GENERATION_FAILED', `${this.who} returned a malformed answer; nothing was charged for this output.`);
    }
    await tools.remoteCalls.created(job.index, prediction.id);
    return prediction.id;
  }

  /** Reads the prediction until it ends; throws at the deadline, on a failed read, or when the worker stops. */
  private async untilTerminal(id: string, job: MediaJob<K>, tools: MediaTools): Promise<Prediction> {
    const deadline = Date.now() + this.options.deadlineMs;
    for (;;) {
      const prediction = await this.read(await this.call(`/v1/predictions/${encodeURIComponent(id)}`, { method: 'GET' }, tools, true), tools, job.index);
      if (TERMINAL.has(prediction.status as string)) return prediction;
      if (tools.stopping()) throw new MediaGenerationError('GENERATION_FAILED', 'interrupted'); // the worker leaves the job; a resumed run reads the same prediction
      if (Date.now() >= deadline) {
        throw new MediaGenerationError('GENERATION_FAILED', `${this.who} did not finish within ${Math.round(this.options.deadlineMs / 1000)} s; the prediction was cancelled and nothing was charged.`);
      }
      await sleep(this.options.pollMs);
    }
  }

  /** Asks the upstream to cancel a prediction this slot gave up on (best effort: a failure is only logged). */
  private async cancel(id: string, tools: MediaTools): Promise<void> {
    try {
      const response = await this.call(`/v1/predictions/${encodeURIComponent(id)}/cancel`, { method: 'POST' }, tools, true);
      await response.body?.cancel();
    } catch (error) {
      tools.warn({ prediction: id, reason: error instanceof Error ? error.message : String(error) }, 'prediction cancel failed');
    }
  }

  async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
    const earlier = await tools.remoteCalls.find(job.index);
    let id: string;
    if (earlier?.upstreamId) id = earlier.upstreamId; // resumed: look the prediction up, never create a second one
    else if (earlier) throw new MediaHoldError(`a prediction was requested for this output before the job was interrupted and its id never came back; whether it runs (and charges) cannot be known`);
    else id = await this.create(job, tools);

    let prediction: Prediction;
    try {
      prediction = await this.untilTerminal(id, job, tools);
    } catch (error) {
      // Given up (a read that failed, the deadline): cancelled upstream, so it stops billing. A stop leaves it for the resumed run.
      if (!tools.stopping()) await this.cancel(id, tools);
      throw error;
    }
    if (prediction.status === 'failed') {
      const reason = typeof prediction.error === 'string' && /nsfw|content|safety|policy/i.test(prediction.error) ? ' under its content policy' : '';
      throw new MediaGenerationError('GENERATION_FAILED', `${this.who} could not make this output${reason}; nothing was charged for it.`);
    }
    if (prediction.status === 'canceled') throw new MediaGenerationError('GENERATION_FAILED', `${this.who} cancelled this output; nothing was charged for it.`);
    const url = Array.isArray(prediction.output) ? prediction.output[0] : prediction.output;
    if (typeof url !== 'string') {
      tools.warn({ slot: job.index }, 'prediction succeeded without an output URL');
      throw new MediaGenerationError('GENERATION_FAILED', `${this.who} returned no output; nothing was charged for it.`);
    }
    const { file, mimeType } = await downloadOutput(url, this.kind, tools, { who: this.who, maxBytes: this.options.maxOutputBytes, deadlineMs: this.options.attemptTimeoutMs * 3, allow: this.options.fetchAllow });
    return { file, mimeType };
  }
}
