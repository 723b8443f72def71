/**
 * Any kind through an asynchronous prediction API in Replicate's HTTP shape:
 * create a prediction (`POST /v1/models/{owner}/{name}/predictions`, or
 * `POST /v1/predictions` with a version), read it (`GET /v1/predictions/{id}`)
 * until `succeeded`, `failed`, `canceled` or `aborted`; outputs are URLs (a
 * string, a list, or an object of them; `data:` URLs included), taken here.
 *
 * Exactly once: the slot is marked `calling` before the create request and
 * the prediction id is recorded as soon as it answers; a resumed job reads that
 * prediction instead of creating another. A create request is sent again only
 * when nothing was done (refused connection, 429, 503); an unknown outcome
 * (lost, another 5xx, a malformed answer) is looked up when an id came back,
 * otherwise the task is held for an operator. Reads back off when throttled
 * and keep the prediction; a slot given up (deadline, a refused read, no
 * usable output) cancels its prediction, so nothing runs on unpaid.
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
import {
  MediaGenerationError,
  type GeneratedOutput,
  type JobRequests,
  type MediaJob,
  type MediaKind,
  type MediaProvider,
  type MediaTools,
} from '../media-types.ts';
import { readJsonBounded } from './body.ts';
import { JOB_ANSWER_MAX_BYTES, outputOf, readPacing, runAsyncJob, type AsyncUpstream } from './async-job.ts';
import { NOT_PROCESSED, type RemoteProviderDescriptor } from './descriptor.ts';
import { inputFor, jobWithLinks, linkedMedia, mappedRequestProblem, outputUrl, parseInputMapping, REQUEST_FIELDS } from './input-mapping.ts';
import { baseOf, callUpstream } from './http.ts';
import { acceptedCapabilities, acceptsProblem, parseAccepts, type Accepts } from './mapped-capabilities.ts';
import { pacedFetch, type ReadLimits, type TokenBucket } from './read-limit.ts';
import { say } from './sentences.ts';
import type { FetchAllow } from './public-fetch.ts';

export interface ReplicateEntry {
  /** `owner/name` of an official model, or a version id (`POST /v1/predictions`). */
  model?: string;
  version?: string;
  input: Record<string, unknown>;
  /** The values the upstream model takes per request field it carries (mapped-capabilities.ts). */
  accepts: Accepts;
}

export interface ReplicateOptions {
  url: string;
  token: string | undefined;
  pollMs: number;
  /** PUBLIC_BASE_URL is set: source and reference media a mapping carries go upstream as signed links. */
  linked?: boolean;
  /** Reads (polls, results, cancels) a minute for this process and deployment (`REPLICATE_READS_PER_MINUTE`, read-limit.ts). */
  readsPerMinute: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  /** Private addresses an output URL may point at (`REMOTE_FETCH_ALLOW`). */
  fetchAllow: FetchAllow;
  readLimits: ReadLimits;
}

/** Checks a catalog entry's `replicate` block; throws a message naming `where`. */
export function parseReplicateEntry(raw: unknown, kind: MediaKind, where: string, listed: Record<string, unknown> = {}, linked = false): ReplicateEntry {
  const r = raw as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null) throw new Error(`${where}: provider replicate needs a "replicate" mapping (model or version, and input)`);
  const model = r.model;
  const version = r.version;
  if (model !== undefined && (typeof model !== 'string' || !/^[\w.-]+\/[\w.-]+$/.test(model)))
    throw new Error(`${where}: replicate.model must look like owner/name`);
  if (version !== undefined && (typeof version !== 'string' || !/^[\w.:/-]{1,200}$/.test(version)))
    throw new Error(`${where}: replicate.version must be a version id`);
  if ((model === undefined) === (version === undefined)) throw new Error(`${where}: replicate needs exactly one of model and version`);
  const input = parseInputMapping(r.input, kind, where, 'replicate.input');
  const accepts = parseAccepts(r.accepts, kind, input, listed, where, 'replicate.accepts', linked);
  return { ...(model !== undefined && { model: model }), ...(version !== undefined && { version: version }), input, accepts };
}

// The tests and docs reach the mapping through this module too.
export { inputFor, outputUrl, REQUEST_FIELDS };

interface Prediction {
  id?: unknown;
  status?: unknown;
  output?: unknown;
  error?: unknown;
}

/** Replicate's terminal statuses (`aborted`: stopped before it started, e.g. a deadline of its own). */
const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'aborted']);

export class ReplicateProvider<K extends MediaKind> implements MediaProvider<K> {
  readonly name = 'replicate';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  private readonly who: string;
  /** The process's one pace for reads of this deployment. */
  private readonly reads: TokenBucket;
  /** The media fields handed upstream as links (none without PUBLIC_BASE_URL). */
  private readonly media: Set<string>;
  constructor(
    private readonly kind: K,
    private readonly entry: ReplicateEntry,
    private readonly options: ReplicateOptions,
  ) {
    this.base = baseOf(options.url);
    this.who = `The ${kind} provider`;
    this.media = linkedMedia(kind, entry.input, options.linked === true);
    this.reads = options.readLimits.limiter('replicate', this.base, options.token, options.readsPerMinute);
  }

  requestProblem(_model: string, request: JobRequests[K]): string | undefined {
    return mappedRequestProblem(request, 'a prediction model', this.media, this.options.linked === true) ?? acceptsProblem(request, this.entry.accepts);
  }

  /** Discovery's view: what the prediction model takes (its `accepts` table), only the media it is given as links. */
  capabilities(_model: string, listed: Record<string, unknown>): Record<string, unknown> {
    return acceptedCapabilities(this.kind, listed, this.entry.accepts, this.media);
  }

  private headers(): Record<string, string> {
    return { 'content-type': 'application/json', ...(this.options.token && { authorization: `Bearer ${this.options.token}` }) };
  }

  private call(
    path: string,
    init: RequestInit,
    tools: MediaTools,
    replayable: boolean,
    pacing: { deadlineMs?: number; attempts?: number; backoffMs?: number; maxBackoffMs?: number } = {},
  ): Promise<Response> {
    return callUpstream((signal) => pacedFetch(this.reads, replayable, `${this.base}${path}`, { ...init, headers: this.headers() }, signal), {
      who: this.who,
      provider: this.name,
      errors: tools.upstreamErrors,
      deadlineMs: this.options.attemptTimeoutMs * 3,
      attemptTimeoutMs: this.options.attemptTimeoutMs,
      replayable,
      notDone: replicate.failures.notDone,
      stopping: tools.stopping,
      signal: tools.signal,
      ...pacing,
    });
  }

  private async read(response: Response, tools: MediaTools, slot: number): Promise<Prediction> {
    // Bounded while read: a prediction (its input, logs and output URLs) is small; a huge answer fails the read.
    const body = (await readJsonBounded(response, JOB_ANSWER_MAX_BYTES, this.who).catch(() => undefined)) as Prediction | undefined;
    if (typeof body !== 'object' || body === null || typeof body.status !== 'string') {
      tools.warn({ slot, upstreamRequestId: response.headers.get('x-request-id') ?? undefined }, 'prediction answer malformed');
      throw new MediaGenerationError('GENERATION_FAILED', say.malformed(this.who));
    }
    return body;
  }

  /** The slot's prediction as an asynchronous job (async-job.ts): create, read, cancel. */
  private upstream(job: MediaJob<K>, tools: MediaTools): AsyncUpstream<Prediction> {
    const input = inputFor(this.entry, job.request);
    const [path, body] = this.entry.model
      ? [`/v1/models/${this.entry.model}/predictions`, { input }]
      : ['/v1/predictions', { version: this.entry.version, input }];
    const at = (id: string) => `/v1/predictions/${encodeURIComponent(id)}`;
    return {
      who: this.who,
      provider: this.name,
      noun: 'prediction',
      pollMs: this.options.pollMs,
      deadlineMs: this.options.deadlineMs,
      create: () => this.call(path, { method: 'POST', body: JSON.stringify(body) }, tools, false),
      idOf: (answer) => (typeof answer?.id === 'string' && answer.id !== '' ? answer.id : undefined),
      read: async (id, deadline) => {
        const pacing = readPacing(this.options.pollMs, this.options.attemptTimeoutMs, deadline);
        return this.read(await this.call(at(id), { method: 'GET' }, tools, true, pacing), tools, job.index);
      },
      ended: (p) => TERMINAL.has(p.status as string),
      cancel: (id) => this.call(`${at(id)}/cancel`, { method: 'POST' }, tools, true),
    };
  }

  async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
    const { state: prediction } = await runAsyncJob(job, tools, this.upstream(await jobWithLinks(job, tools), tools));
    if (prediction.status === 'failed') throw new MediaGenerationError('GENERATION_FAILED', say.failed(this.who, prediction.error));
    if (prediction.status === 'canceled') throw new MediaGenerationError('GENERATION_FAILED', say.canceled(this.who));
    if (prediction.status === 'aborted') throw new MediaGenerationError('GENERATION_FAILED', say.aborted(this.who));
    return outputOf(prediction.output, this.kind, tools, job.index, {
      who: this.who,
      maxBytes: this.options.maxOutputBytes,
      deadlineMs: this.options.attemptTimeoutMs * 3,
      allow: this.options.fetchAllow,
    });
  }
}

/** Prediction APIs in Replicate's shape: `REPLICATE_*`, and a `replicate:` block per catalog model. */
export const replicate: RemoteProviderDescriptor = {
  name: 'replicate',
  kinds: ['image', 'video', 'audio'],
  dialect: 'Replicate predictions (POST /v1/models/{owner}/{name}/predictions or /v1/predictions, GET /v1/predictions/{id})',
  requestFields: REQUEST_FIELDS,
  // Replicate documents 429 as throttled (not run); an unknown create is read by the id its answer carried, else held.
  failures: { notDone: NOT_PROCESSED, unknown: 'lookup', reads: 'resent' },
  deployment: (model, config, d) => ({
    model: { ...model, providerEntry: d.entry ?? model.providerEntry },
    config: { ...config, replicateApiUrl: d.url ?? config.replicateApiUrl, replicateApiToken: d.key ?? config.replicateApiToken },
  }),
  create(model, { config, common, where }) {
    const kind = model.kind as MediaKind;
    const linked = config.publicBaseUrl !== undefined;
    const entry = parseReplicateEntry(model.providerEntry, kind, where, model.listedCapabilities, linked);
    return new ReplicateProvider(kind, entry, {
      url: config.replicateApiUrl,
      token: config.replicateApiToken,
      pollMs: config.replicatePollMs,
      readsPerMinute: config.replicateReadsPerMinute,
      linked,
      ...common,
    });
  },
};
