/**
 * The life of one output slot at an asynchronous upstream (a Replicate
 * prediction, a fal queued request), shared by the providers that have one:
 * create the job exactly once, its id recorded before anything waits on it;
 * read it until it ends, backing off when throttled and keeping it; cancel it
 * when the slot is given up (so nothing runs on unpaid); leave it for the
 * resumed run when the worker stops. The provider says how to create, read and
 * cancel, and what its answers mean.
 */
import { MediaGenerationError, MediaHoldError, type GeneratedOutput, type MediaJob, type MediaKind, type MediaTools } from '../media-types.ts';
import { readErrorText } from './body.ts';
import { UpstreamUnknown } from './http.ts';
import { outputUrl } from './input-mapping.ts';
import { dataUrlOutput, downloadOutput } from './output.ts';
import type { FetchAllow } from './public-fetch.ts';
import { say } from './sentences.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** The largest create, status or result answer read (logs can run to hundreds of kilobytes; outputs are URLs). */
export const JOB_ANSWER_MAX_BYTES = 4 * 1024 * 1024;

/** A JSON object, or undefined. */
export function jsonObjectOf(text: string | undefined): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text ?? '') as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export interface AsyncUpstream<T> {
  /** "The video provider". */
  who: string;
  /** The provider's name, recorded with the slot. */
  provider: string;
  /** What the upstream calls a job ("prediction", "request"), for messages. */
  noun: string;
  pollMs: number;
  deadlineMs: number;
  /** Sends the creating request once (a call that is not replayable). */
  create(): Promise<Response>;
  /** The job's id in a create answer. */
  idOf(answer: Record<string, unknown> | undefined): string | undefined;
  /** Reads the job's state, backing off until `deadline` while throttled. */
  read(id: string, deadline: number): Promise<T>;
  /** Whether the state is final. */
  ended(state: T): boolean;
  /** Asks the upstream to cancel the job. */
  cancel(id: string): Promise<Response>;
}

/**
 * Creates the slot's job: the slot marked `calling` first, the id recorded as
 * soon as it answers. An unknown outcome is looked up by the id its answer
 * carried, or holds the task when it carried none.
 */
async function createOnce<T>(job: MediaJob, tools: MediaTools, up: AsyncUpstream<T>): Promise<string> {
  await tools.remoteCalls.calling(job.index, up.provider);
  let id: string | undefined;
  try {
    const response = await up.create();
    // Its head only (an answer cut at the bound reads as malformed, which holds: the job may exist).
    id = up.idOf(jsonObjectOf(await readErrorText(response, JOB_ANSWER_MAX_BYTES)));
  } catch (error) {
    if (!(error instanceof UpstreamUnknown)) throw error;
    id = up.idOf(jsonObjectOf(error.body));
    if (!id) throw error;
  }
  if (!id) {
    tools.warn({ slot: job.index }, `${up.noun} create answer malformed`);
    throw new MediaHoldError(`${up.who} answered the ${up.noun} request without an id; whether it runs (and charges) cannot be known`);
  }
  await tools.remoteCalls.created(job.index, id);
  return id;
}

/** Asks the upstream to cancel a job this slot gave up on (best effort: a failure is only logged). */
async function cancelQuietly<T>(id: string, tools: MediaTools, up: AsyncUpstream<T>): Promise<void> {
  try {
    await (await up.cancel(id)).body?.cancel();
  } catch (error) {
    tools.warn({ [up.noun]: id, reason: error instanceof Error ? error.message : String(error) }, `${up.noun} cancel failed`);
  }
}

/**
 * Runs the slot's job to its end and returns its final state (and id): a
 * resumed slot reads the job recorded before, never creates a second one; a
 * slot whose create was interrupted before its id came back is held.
 */
export async function runAsyncJob<T>(job: MediaJob, tools: MediaTools, up: AsyncUpstream<T>): Promise<{ id: string; state: T }> {
  const earlier = await tools.remoteCalls.find(job.index);
  let id: string;
  if (earlier?.upstreamId) id = earlier.upstreamId;
  else if (earlier)
    throw new MediaHoldError(
      `a ${up.noun} was requested for this output before the job was interrupted and its id never came back; whether it runs (and charges) cannot be known`,
    );
  else id = await createOnce(job, tools, up);

  const deadline = Date.now() + up.deadlineMs;
  let state: T | undefined;
  try {
    for (;;) {
      state = await up.read(id, deadline);
      if (up.ended(state)) return { id, state };
      if (tools.stopping()) throw new MediaGenerationError('GENERATION_FAILED', 'interrupted'); // the worker leaves the job; a resumed run reads the same one
      if (Date.now() >= deadline) throw new MediaGenerationError('GENERATION_FAILED', say.tooSlow(up.who, up.deadlineMs, up.noun));
      await sleep(up.pollMs);
    }
  } catch (error) {
    // Given up (deadline, a refused, malformed or oversized read): cancelled upstream, so it stops
    // billing. A stop leaves it running for the resumed run, which reads the same job.
    if (!tools.stopping() && !(state !== undefined && up.ended(state))) await cancelQuietly(id, tools, up);
    throw error;
  }
}

/**
 * How a job's reads are paced: each gets a whole attempt even near the
 * deadline (the deadline is judged on what it answers); throttling and
 * outages back off from the poll interval to 16 times it, as long as the
 * deadline allows.
 */
export function readPacing(pollMs: number, attemptTimeoutMs: number, deadline: number) {
  return { deadlineMs: Math.max(attemptTimeoutMs, deadline - Date.now()), attempts: Number.POSITIVE_INFINITY, backoffMs: pollMs, maxBackoffMs: pollMs * 16 };
}

/**
 * The output a finished job's answer points at (`outputUrl`): a `data:` URL
 * decoded, any other downloaded from a public or allowed address; an answer
 * without one fails the slot, nothing charged.
 */
export function outputOf(
  answer: unknown,
  kind: MediaKind,
  tools: MediaTools,
  slot: number,
  options: { who: string; maxBytes: number; deadlineMs: number; allow: FetchAllow },
): Promise<GeneratedOutput> {
  const url = outputUrl(answer, kind);
  if (url === undefined) {
    tools.warn({ slot }, 'upstream job ended without an output URL');
    throw new MediaGenerationError('GENERATION_FAILED', say.noOutput(options.who));
  }
  if (url.startsWith('data:')) return dataUrlOutput(url, kind, tools, options.who, options.maxBytes);
  return downloadOutput(url, kind, tools, options);
}
