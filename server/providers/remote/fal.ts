/**
 * Images and video through a queue API in fal's shape (https://docs.fal.ai,
 * "Queue"): submit (`POST {base}/{model id}` with the model's input as the
 * body) answers a `request_id`; the request's status is read
 * (`GET {base}/{owner}/{alias}/requests/{id}/status`: IN_QUEUE, IN_PROGRESS,
 * COMPLETED) and, once COMPLETED, its result (`GET …/requests/{id}`: the
 * model's output, e.g. `{"images": [{"url": …}]}` or `{"video": {"url": …}}`);
 * a request given up is cancelled (`PUT …/requests/{id}/cancel`). The key goes
 * as `Authorization: Key …`.
 *
 * Exactly once, as Replicate's predictions: the slot is marked `calling`
 * before the submit and the request id recorded as soon as it answers; a
 * resumed job reads that request. A submit is sent again only when nothing
 * was done (refused connection, 408, 429, 503); an unknown outcome is looked
 * up when its answer carried a request id, otherwise the task is held. fal
 * documents no idempotency key for a submit.
 *
 * A catalog entry maps the public request onto the model's input (input-mapping.ts):
 *   fal:
 *     model: fal-ai/flux/dev
 *     input:
 *       prompt: '{prompt}'
 *       seed: '{seed}'
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
import { JOB_ANSWER_MAX_BYTES, outputOf, readPacing, runAsyncJob, type AsyncUpstream } from './async-job.ts';
import { readJsonBounded } from './body.ts';
import { NOT_PROCESSED, type RemoteProviderDescriptor } from './descriptor.ts';
import { callUpstream } from './http.ts';
import { inputFor, jobWithLinks, linkedMedia, mappedRequestProblem, parseInputMapping, REQUEST_FIELDS } from './input-mapping.ts';
import type { FetchAllow } from './public-fetch.ts';
import { pacedFetch, type ReadLimits, type TokenBucket } from './read-limit.ts';
import { acceptedCapabilities, acceptsProblem, parseAccepts, type Accepts } from './mapped-capabilities.ts';
import { say } from './sentences.ts';

export interface FalEntry {
  /** The endpoint id: `owner/alias`, optionally followed by a path (`fal-ai/flux/dev`). */
  model: string;
  input: Record<string, unknown>;
  /** The values the upstream model takes per request field it carries (mapped-capabilities.ts). */
  accepts: Accepts;
}

export interface FalOptions {
  url: string;
  key: string | undefined;
  pollMs: number;
  /** PUBLIC_BASE_URL is set: source and reference media a mapping carries go upstream as signed links. */
  linked?: boolean;
  /** Reads (status, result, cancel) a minute for this process and deployment (`FAL_READS_PER_MINUTE`, read-limit.ts). */
  readsPerMinute: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  fetchAllow: FetchAllow;
  readLimits: ReadLimits;
}

/** Checks a catalog entry's `fal` block; throws a message naming `where`. */
export function parseFalEntry(raw: unknown, kind: MediaKind, where: string, listed: Record<string, unknown> = {}, linked = false): FalEntry {
  const r = raw as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null) throw new Error(`${where}: provider fal needs a "fal" mapping (model and input)`);
  if (typeof r.model !== 'string' || !/^[\w.-]+\/[\w.-]+(\/[\w.-]+)*$/.test(r.model))
    throw new Error(`${where}: fal.model must look like owner/alias or owner/alias/path`);
  const input = parseInputMapping(r.input, kind, where, 'fal.input');
  return { model: r.model, input, accepts: parseAccepts(r.accepts, kind, input, listed, where, 'fal.accepts', linked) };
}

export class FalProvider<K extends MediaKind> implements MediaProvider<K> {
  readonly name = 'fal';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  /** Status, result and cancel live under the app (`owner/alias`), without the endpoint's path. */
  private readonly app: string;
  private readonly who: string;
  /** The process's one pace for reads of this deployment. */
  private readonly reads: TokenBucket;
  /** The media fields handed upstream as links (none without PUBLIC_BASE_URL). */
  private readonly media: Set<string>;
  constructor(
    private readonly kind: K,
    private readonly entry: FalEntry,
    private readonly options: FalOptions,
  ) {
    this.base = options.url.replace(/\/+$/, '');
    this.app = entry.model.split('/').slice(0, 2).join('/');
    this.who = `The ${kind} provider`;
    this.media = linkedMedia(kind, entry.input, options.linked === true);
    this.reads = options.readLimits.limiter('fal', this.base, options.key, options.readsPerMinute);
  }

  requestProblem(_model: string, request: JobRequests[K]): string | undefined {
    return mappedRequestProblem(request, 'a queued model', this.media, this.options.linked === true) ?? acceptsProblem(request, this.entry.accepts);
  }

  /** Discovery's view: what the queued model takes (its `accepts` table), only the media it is given as links. */
  capabilities(_model: string, listed: Record<string, unknown>): Record<string, unknown> {
    return acceptedCapabilities(this.kind, listed, this.entry.accepts, this.media);
  }

  private call(
    path: string,
    init: RequestInit,
    tools: MediaTools,
    replayable: boolean,
    pacing: { deadlineMs?: number; attempts?: number; backoffMs?: number; maxBackoffMs?: number } = {},
  ): Promise<Response> {
    const headers = { 'content-type': 'application/json', ...(this.options.key && { authorization: `Key ${this.options.key}` }) };
    return callUpstream((signal) => pacedFetch(this.reads, replayable, `${this.base}${path}`, { ...init, headers }, signal), {
      who: this.who,
      provider: this.name,
      errors: tools.upstreamErrors,
      deadlineMs: this.options.attemptTimeoutMs * 3,
      attemptTimeoutMs: this.options.attemptTimeoutMs,
      replayable,
      notDone: fal.failures.notDone,
      stopping: tools.stopping,
      signal: tools.signal,
      ...pacing,
    });
  }

  private async json(response: Response, tools: MediaTools, slot: number): Promise<Record<string, unknown>> {
    const body = await readJsonBounded(response, JOB_ANSWER_MAX_BYTES, this.who).catch(() => undefined);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      tools.warn({ slot, upstreamRequestId: response.headers.get('x-fal-request-id') ?? undefined }, 'queue answer malformed');
      throw new MediaGenerationError('GENERATION_FAILED', say.malformed(this.who));
    }
    return body as Record<string, unknown>;
  }

  /** The slot's queued request as an asynchronous job (async-job.ts): submit, status, cancel. */
  private upstream(job: MediaJob<K>, tools: MediaTools): AsyncUpstream<Record<string, unknown>> {
    const at = (id: string) => `/${this.app}/requests/${encodeURIComponent(id)}`;
    return {
      who: this.who,
      provider: this.name,
      noun: 'request',
      pollMs: this.options.pollMs,
      deadlineMs: this.options.deadlineMs,
      create: () => this.call(`/${this.entry.model}`, { method: 'POST', body: JSON.stringify(inputFor(this.entry, job.request)) }, tools, false),
      idOf: (answer) => (typeof answer?.request_id === 'string' && answer.request_id !== '' ? answer.request_id : undefined),
      read: async (id, deadline) => {
        const pacing = readPacing(this.options.pollMs, this.options.attemptTimeoutMs, deadline);
        const answer = await this.json(await this.call(`${at(id)}/status`, { method: 'GET' }, tools, true, pacing), tools, job.index);
        if (typeof answer.status !== 'string') throw new MediaGenerationError('GENERATION_FAILED', say.malformed(this.who));
        return answer;
      },
      ended: (status) => status.status === 'COMPLETED',
      cancel: (id) => this.call(`${at(id)}/cancel`, { method: 'PUT' }, tools, true),
    };
  }

  async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
    const { id, state } = await runAsyncJob(job, tools, this.upstream(await jobWithLinks(job, tools), tools));
    if (state.error !== undefined && state.error !== null) throw new MediaGenerationError('GENERATION_FAILED', say.failed(this.who, state.error));
    // The result of a request that failed upstream answers its error status: a refusal, released.
    const result = await this.json(await this.call(`/${this.app}/requests/${encodeURIComponent(id)}`, { method: 'GET' }, tools, true), tools, job.index);
    return outputOf(result, this.kind, tools, job.index, {
      who: this.who,
      maxBytes: this.options.maxOutputBytes,
      deadlineMs: this.options.attemptTimeoutMs * 3,
      allow: this.options.fetchAllow,
    });
  }
}

/** Queue APIs in fal's shape: `FAL_*`, and a `fal:` block per catalog model. */
export const fal: RemoteProviderDescriptor = {
  name: 'fal',
  kinds: ['image', 'video'],
  dialect: 'fal queue (POST /{model}, GET /{owner}/{alias}/requests/{id}/status, GET …/requests/{id}, PUT …/requests/{id}/cancel)',
  requestFields: { image: REQUEST_FIELDS.image, video: REQUEST_FIELDS.video },
  failures: { notDone: NOT_PROCESSED, unknown: 'lookup', reads: 'resent' },
  deployment: (model, config, d) => ({
    model: { ...model, providerEntry: d.entry ?? model.providerEntry },
    config: { ...config, falQueueUrl: d.url ?? config.falQueueUrl, falKey: d.key ?? config.falKey },
  }),
  create(model, { config, common, where }) {
    const kind = model.kind as MediaKind;
    const linked = config.publicBaseUrl !== undefined;
    const entry = parseFalEntry(model.providerEntry, kind, where, model.listedCapabilities, linked);
    return new FalProvider(kind, entry, {
      url: config.falQueueUrl,
      key: config.falKey,
      pollMs: config.falPollMs,
      readsPerMinute: config.falReadsPerMinute,
      linked,
      ...common,
    });
  },
};
