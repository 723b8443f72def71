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
import { MediaGenerationError, MediaHoldError, type GeneratedOutput, type JobRequests, type MediaJob, type MediaKind, type MediaProvider, type MediaTools } from '../media-types.ts';
import { readErrorText, readJsonBounded } from './body.ts';
import { NOT_PROCESSED, type RemoteProviderDescriptor } from './descriptor.ts';
import { callUpstream, UpstreamUnknown } from './http.ts';
import { inputFor, mappedRequestProblem, outputUrl, parseInputMapping, REQUEST_FIELDS } from './input-mapping.ts';
import { dataUrlOutput, downloadOutput } from './output.ts';
import type { FetchAllow } from './public-fetch.ts';
import { say } from './sentences.ts';

export interface FalEntry {
  /** The endpoint id: `owner/alias`, optionally followed by a path (`fal-ai/flux/dev`). */
  model: string;
  input: Record<string, unknown>;
}

export interface FalOptions {
  url: string;
  key: string | undefined;
  pollMs: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  fetchAllow: FetchAllow;
}

/** Checks a catalog entry's `fal` block; throws a message naming `where`. */
export function parseFalEntry(raw: unknown, kind: MediaKind, where: string): FalEntry {
  const r = raw as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null) throw new Error(`${where}: provider fal needs a "fal" mapping (model and input)`);
  if (typeof r.model !== 'string' || !/^[\w.-]+\/[\w.-]+(\/[\w.-]+)*$/.test(r.model)) throw new Error(`${where}: fal.model must look like owner/alias or owner/alias/path`);
  return { model: r.model, input: parseInputMapping(r.input, kind, where, 'fal.input') };
}

interface QueueAnswer {
  request_id?: unknown;
  status?: unknown;
  error?: unknown;
}

/** The largest status or result answer read (logs can be long; outputs are URLs). */
const ANSWER_MAX_BYTES = 4 * 1024 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function parsed(text: string | undefined): QueueAnswer | undefined {
  try {
    const value = JSON.parse(text ?? '') as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as QueueAnswer) : undefined;
  } catch {
    return undefined;
  }
}

export class FalProvider<K extends MediaKind> implements MediaProvider<K> {
  readonly name = 'fal';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  /** Status, result and cancel live under the app (`owner/alias`), without the endpoint's path. */
  private readonly app: string;
  private readonly who: string;
  constructor(
    private readonly kind: K,
    private readonly entry: FalEntry,
    private readonly options: FalOptions,
  ) {
    this.base = options.url.replace(/\/+$/, '');
    this.app = entry.model.split('/').slice(0, 2).join('/');
    this.who = `The ${kind} provider`;
  }

  requestProblem(_model: string, request: JobRequests[K]): string | undefined {
    return mappedRequestProblem(request, 'a queued model');
  }

  private call(path: string, init: RequestInit, tools: MediaTools, replayable: boolean, pacing: { deadlineMs?: number; attempts?: number; backoffMs?: number; maxBackoffMs?: number } = {}): Promise<Response> {
    const headers = { 'content-type': 'application/json', ...(this.options.key && { authorization: `Key ${this.options.key}` }) };
    return callUpstream((signal) => fetch(`${this.base}${path}`, { ...init, headers, signal }), {
      who: this.who,
      provider: this.name,
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
    const body = await readJsonBounded(response, ANSWER_MAX_BYTES, this.who).catch(() => undefined);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      tools.warn({ slot, upstreamRequestId: response.headers.get('x-fal-request-id') ?? undefined }, 'queue answer malformed');
      throw new MediaGenerationError('GENERATION_FAILED', say.malformed(this.who));
    }
    return body as Record<string, unknown>;
  }

  /** Submits the slot's request, its id recorded before anything waits on it; an unknown outcome is looked up by the id it carries, or held. */
  private async submit(job: MediaJob<K>, tools: MediaTools): Promise<string> {
    await tools.remoteCalls.calling(job.index, this.name);
    let answer: QueueAnswer | undefined;
    try {
      const response = await this.call(`/${this.entry.model}`, { method: 'POST', body: JSON.stringify(inputFor(this.entry, job.request)) }, tools, false);
      answer = parsed(await readErrorText(response, ANSWER_MAX_BYTES));
    } catch (error) {
      if (!(error instanceof UpstreamUnknown)) throw error;
      answer = parsed(error.body);
      if (typeof answer?.request_id !== 'string' || answer.request_id === '') throw error;
    }
    if (typeof answer?.request_id !== 'string' || answer.request_id === '') {
      tools.warn({ slot: job.index }, 'queue submit answer malformed');
      throw new MediaHoldError(`${this.who} answered the queued request without an id; whether it runs (and charges) cannot be known`);
    }
    await tools.remoteCalls.created(job.index, answer.request_id);
    return answer.request_id;
  }

  /** Reads the request's status; throttling and outages back off until `deadline`, the request kept. */
  private async status(id: string, tools: MediaTools, slot: number, deadline: number): Promise<QueueAnswer> {
    const pacing = { deadlineMs: Math.max(this.options.attemptTimeoutMs, deadline - Date.now()), attempts: Number.POSITIVE_INFINITY, backoffMs: this.options.pollMs, maxBackoffMs: this.options.pollMs * 16 };
    const answer = await this.json(await this.call(`/${this.app}/requests/${encodeURIComponent(id)}/status`, { method: 'GET' }, tools, true, pacing), tools, slot);
    if (typeof answer.status !== 'string') throw new MediaGenerationError('GENERATION_FAILED', say.malformed(this.who));
    return answer;
  }

  /** Asks the upstream to cancel a request this slot gave up on (best effort: a failure is only logged). */
  private async cancel(id: string, tools: MediaTools): Promise<void> {
    try {
      const response = await this.call(`/${this.app}/requests/${encodeURIComponent(id)}/cancel`, { method: 'PUT' }, tools, true);
      await response.body?.cancel();
    } catch (error) {
      tools.warn({ request: id, reason: error instanceof Error ? error.message : String(error) }, 'queued request cancel failed');
    }
  }

  async generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput> {
    const earlier = await tools.remoteCalls.find(job.index);
    let id: string;
    if (earlier?.upstreamId) id = earlier.upstreamId; // resumed: read the same request, never submit a second one
    else if (earlier) throw new MediaHoldError('a queued request was submitted for this output before the job was interrupted and its id never came back; whether it runs (and charges) cannot be known');
    else id = await this.submit(job, tools);

    const deadline = Date.now() + this.options.deadlineMs;
    let status: QueueAnswer | undefined;
    try {
      for (;;) {
        status = await this.status(id, tools, job.index, deadline);
        if (status.status === 'COMPLETED') break;
        if (tools.stopping()) throw new MediaGenerationError('GENERATION_FAILED', 'interrupted'); // the resumed run reads the same request
        if (Date.now() >= deadline) throw new MediaGenerationError('GENERATION_FAILED', say.tooSlow(this.who, this.options.deadlineMs, 'request'));
        await sleep(this.options.pollMs);
      }
    } catch (error) {
      // Given up (deadline, a refused or malformed read): cancelled upstream so it stops billing; a stop leaves it for the resumed run.
      if (!tools.stopping() && status?.status !== 'COMPLETED') await this.cancel(id, tools);
      throw error;
    }
    if (status.error !== undefined && status.error !== null) throw new MediaGenerationError('GENERATION_FAILED', say.failed(this.who, status.error));
    // The result of a request that failed upstream answers its error status: a refusal, released.
    const result = await this.json(await this.call(`/${this.app}/requests/${encodeURIComponent(id)}`, { method: 'GET' }, tools, true), tools, job.index);
    const url = outputUrl(result, this.kind);
    if (url === undefined) {
      tools.warn({ slot: job.index }, 'queued request completed without an output URL');
      throw new MediaGenerationError('GENERATION_FAILED', say.noOutput(this.who));
    }
    if (url.startsWith('data:')) return dataUrlOutput(url, this.kind, tools, this.who, this.options.maxOutputBytes);
    return downloadOutput(url, this.kind, tools, { who: this.who, maxBytes: this.options.maxOutputBytes, deadlineMs: this.options.attemptTimeoutMs * 3, allow: this.options.fetchAllow });
  }
}

/** Queue APIs in fal's shape: `FAL_*`, and a `fal:` block per catalog model. */
export const fal: RemoteProviderDescriptor = {
  name: 'fal',
  kinds: ['image', 'video'],
  dialect: 'fal queue (POST /{model}, GET /{owner}/{alias}/requests/{id}/status, GET …/requests/{id}, PUT …/requests/{id}/cancel)',
  requestFields: { image: REQUEST_FIELDS.image, video: REQUEST_FIELDS.video },
  failures: { notDone: NOT_PROCESSED, unknown: 'lookup', reads: 'resent' },
  create(model, { config, common, where }) {
    const kind = model.kind as MediaKind;
    const entry = parseFalEntry(model.providerEntry, kind, where);
    return new FalProvider(kind, entry, { url: config.falQueueUrl, key: config.falKey, pollMs: config.falPollMs, ...common }) as MediaProvider;
  },
};
