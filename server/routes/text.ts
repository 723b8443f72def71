/**
 * POST /api/generate/text/v1/chat/completions: HTTP ↔ the text use case.
 * JSON completions go through `res.json` (response-validated); streams are
 * written as SSE frames with `res.write`, which response validation leaves alone.
 */
import { Router, type Request, type Response } from 'express';
import type { components } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { DomainError } from '../domain/errors.ts';
import { apiErrorOf } from '../http/error-map.ts';
import { identityRecordOf, principalOf } from '../http/context.ts';
import { createChatCompletion, type ChatCompletion, type ChatCompletionRequest, type LiveGeneration, type TextDeps } from '../domain/text.ts';
import { keyWatcher, type KeyWatcher } from '../domain/key-watch.ts';
import type { Principal } from '../domain/accounts.ts';

type Chunk = components['schemas']['ChatCompletionChunk'];

const PATH = '/api/generate/text/v1/chat/completions';

export function textRouter(deps: AppDeps): Router {
  const text: TextDeps = {
    db: deps.db,
    clock: deps.clock,
    catalog: deps.catalog,
    logger: deps.logger,
    providers: deps.providers.text,
    scenariosEnabled: deps.config.scenariosEnabled,
    inflight: deps.inflight,
    limits: deps.admission,
  };
  const keys = keyWatcher(deps.db, deps.clock);
  const router = Router();
  router.post(PATH, async (req, res) => {
    const body = req.body as ChatCompletionRequest;
    const principal = principalOf(req);
    const outcome = await createChatCompletion(text, principal, req.get('idempotency-key') ?? '', body, identityRecordOf(req, deps.db));
    const stream = body.stream === true;
    if (outcome.type === 'replay') {
      if (stream) replayStream(res, outcome.completion);
      else res.status(200).json(outcome.completion);
      return;
    }
    // From here the response waits on the provider: it ends when its key stops being valid.
    const refusal = refusalOf(keys, principal);
    try {
      if (stream) {
        await liveStream(req, res, outcome.generation, refusal);
        return;
      }
      const result = await Promise.race([outcome.generation.result, refusal.signal]);
      if (result === REFUSED) throw refusal.error();
      if (result instanceof DomainError) throw result;
      res.status(200).json(result);
    } finally {
      refusal.stop();
    }
  });
  return router;
}

const REFUSED = Symbol('refused');

interface Refusal {
  /** Resolves to REFUSED once access ended (never rejects). */
  signal: Promise<typeof REFUSED>;
  /** The error to end the response with, once `signal` resolved. */
  error(): DomainError;
  stop(): void;
}

/** A key watch for one response, as a promise to race the provider against. */
function refusalOf(keys: KeyWatcher, principal: Principal): Refusal {
  let error: DomainError | undefined;
  let refuse!: () => void;
  const signal = new Promise<typeof REFUSED>((resolve) => (refuse = () => resolve(REFUSED)));
  const stop = keys.watch(principal, (refusal) => {
    error = refusal;
    refuse();
  });
  return { signal, stop, error: () => error! };
}

/** The stream's head; it leaves with the first frame, written right after (one socket write for both). */
function startStream(res: Response): void {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
}

/**
 * Writes one SSE frame; resolves once the socket took it (or the client is gone).
 * Frames written in the same turn of the event loop (the deltas of one upstream
 * read, the last chunk with `[DONE]` and the stream's end) leave in one socket
 * write: the response is corked at the first and uncorked once that turn's
 * work is done, instead of a system call per frame.
 */
function frame(res: Response, data: string): Promise<void> {
  if (res.writableEnded || res.destroyed) return Promise.resolve();
  if (!res.writableCorked) {
    res.cork();
    process.nextTick(() => res.uncork());
  }
  if (res.write(`data: ${data}\n\n`)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/**
 * Ends a stream, its corked frames first: on Node 24 an `end()` while corked
 * sends the stream's end and drops what the cork still held.
 */
function endStream(res: Response): void {
  if (res.writableCorked) res.uncork();
  res.end();
}

const chunkOf = (
  g: Pick<ChatCompletion, 'id' | 'created' | 'model'>,
  delta: Chunk['choices'][number]['delta'],
  finishReason: Chunk['choices'][number]['finish_reason'],
  usage?: ChatCompletion['usage'],
): string => {
  const chunk: Chunk = {
    id: g.id,
    object: 'chat.completion.chunk',
    created: g.created,
    model: g.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
  if (usage) chunk.usage = usage;
  return JSON.stringify(chunk);
};

/** The final chunk carries finish_reason and usage, then `[DONE]` ends the stream. */
async function finishStream(res: Response, completion: ChatCompletion): Promise<void> {
  await frame(res, chunkOf(completion, {}, completion.choices[0]?.finish_reason ?? 'stop', completion.usage));
  await frame(res, '[DONE]');
  endStream(res);
}

/** A completed streaming identity replays as one chunk with the whole answer, the usage chunk and `[DONE]`. */
function replayStream(res: Response, completion: ChatCompletion): void {
  startStream(res);
  void frame(res, chunkOf(completion, { role: 'assistant', content: completion.choices[0]?.message.content ?? '' }, null));
  void finishStream(res, completion);
}

/** An error frame says what the JSON answer would have said (error-map.ts). */
const errorFrame = (error: DomainError) => JSON.stringify(apiErrorOf(error).toEnvelope());

/**
 * Streams a live generation. Headers wait for the first event, so a failure
 * before any output still answers with a plain JSON error; after that, a
 * failure is an error frame and the stream ends without `[DONE]`. When the
 * client leaves, or its key is revoked or expires (key-watch.ts), we stop
 * writing; the generation goes on and settles.
 */
async function liveStream(req: Request, res: Response, generation: LiveGeneration, refusal: Refusal): Promise<void> {
  let gone = false;
  res.on('close', () => {
    if (!res.writableFinished) gone = true;
  });
  let first = true;
  const events = generation.events[Symbol.asyncIterator]();
  for (;;) {
    const next = await Promise.race([events.next(), refusal.signal]);
    if (next === REFUSED || gone) {
      // Leave the generation to go on and settle without us (the queue stops buffering for us).
      void events.return?.(undefined);
      if (next !== REFUSED) break;
      // Access ended: before any output a plain JSON error, after it an error frame and no [DONE].
      if (!res.headersSent) throw refusal.error();
      req.log?.info({ code: refusal.error().code, completion: generation.id }, 'access ended during the stream; the generation continues and settles');
      await frame(res, errorFrame(refusal.error()));
      endStream(res);
      return;
    }
    if (next.done) break;
    const event = next.value;
    if (!res.headersSent) {
      if (event.type === 'error') throw event.error;
      startStream(res);
    }
    if (event.type === 'delta') {
      await frame(res, chunkOf(generation, first ? { role: 'assistant', content: event.content } : { content: event.content }, null));
      first = false;
    } else if (event.type === 'end') {
      await finishStream(res, event.completion);
    } else {
      req.log?.warn({ code: event.error.code, completion: generation.id }, 'text stream failed after headers');
      await frame(res, errorFrame(event.error));
      endStream(res);
    }
  }
  if (gone) req.log?.info({ completion: generation.id }, 'client left the stream; the generation continues and settles');
}
