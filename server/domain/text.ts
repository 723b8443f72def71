/**
 * Text generation: the chat-completions use case.
 *
 *   check what the schema cannot (model, conversation size), ask the provider's pre-flight (503)
 *   → quote a conservative whole-Gem maximum
 *   → claim the identity and reserve in one transaction (idempotency.submit, state pending);
 *     on SQLite first as one statement with the admission's tokens (`submittedAtOnce`)
 *   → run the provider in the background, independent of the client
 *   → settle the measured usage (≤ the reservation) and complete the identity
 *     with the saved response in one transaction.
 *
 * Money rules live in spend.ts (and ledger.ts below it), replay rules in
 * idempotency.ts; this module is the text adapter: its admission checks and its run. A client that disconnects does not stop the generation: it
 * still settles and its result is retained for replay.
 */
import { admit, admitAtClaim, admitsAtClaim, refusedAtClaim, tokensAtOnce, type AdmissionLimits } from './admission.ts';
import crypto from 'node:crypto';
import type { components, operations } from '../../generated/api.ts';
import { DomainError } from './errors.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../storage/db.ts';
import type { Principal } from './accounts.ts';
import type { Catalog } from './catalog.ts';
import type { Clock } from './clock.ts';
import * as idem from './idempotency.ts';
import type { InflightWork } from '../lifecycle.ts';
import * as spend from './spend.ts';
import { newId } from './ids.ts';
import { scenarioOf, stripScenarios } from './scenarios.ts';
import { chatPromptTokens, countTokens } from '../tokens.ts';
import {
  ProviderError,
  usageOf,
  type ChatMessage,
  type FinishReason,
  type TextEvent,
  type TextGenerationRequest,
  type TextProviders,
  type Usage,
} from '../providers/text/types.ts';

export type ChatCompletionRequest = operations['createChatCompletion']['requestBody']['content']['application/json'];
export type ChatCompletion = components['schemas']['ChatCompletion'];

export const OPERATION = 'createChatCompletion';
/** Spec Limits: the serialized conversation (`JSON.stringify(messages)`) in UTF-8 bytes. */
export const MAX_CONVERSATION_BYTES = 128_000;
export const DEFAULT_MAX_TOKENS = 4096;

export type TextRates = spend.TokenRates;

export interface TextDeps {
  db: Db;
  clock: Clock;
  catalog: Catalog;
  logger: Logger;
  /** The text providers, the scenario layer composed in (server.ts). */
  providers: TextProviders;
  scenariosEnabled: boolean;
  /** Where a running generation is registered so a shutdown can wait for its settlement. */
  inflight?: InflightWork;
  /** Request rates (admission.ts), decided before the claim; absent: none. */
  limits?: AdmissionLimits | undefined;
}

/** The reservation: the token quote of the prompt's upper bound and `max_tokens`. */
export function conservativeMaximum(rates: TextRates, promptTokenBound: number, maxTokens: number): number {
  return spend.tokenQuote(rates, { inputTokens: promptTokenBound, outputTokens: maxTokens });
}

/** The charge for measured usage (never above the reservation). */
export function measuredCharge(rates: TextRates, usage: Usage, reserved: number): number {
  return spend.tokenCharge(rates, { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens }, reserved);
}

/** One step of a live generation, in order: deltas, then `end` (settled) or `error`. */
export type GenerationEvent = { type: 'delta'; content: string } | { type: 'end'; completion: ChatCompletion } | { type: 'error'; error: DomainError };

export interface LiveGeneration {
  id: string;
  created: number;
  model: string;
  /** The events as they happen; a consumer may stop early, the generation goes on. */
  events: AsyncIterable<GenerationEvent>;
  /** The settled completion, or the error the first response reports. Never rejects. */
  result: Promise<ChatCompletion | DomainError>;
}

export type ChatOutcome = { type: 'replay'; completion: ChatCompletion } | { type: 'live'; generation: LiveGeneration };

/** A buffer between the generation and one consumer that may leave at any time. */
class EventQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: (() => void) | undefined;
  private closed = false;
  private detached = false;

  push(item: T): void {
    if (this.detached) return;
    this.items.push(item);
    this.wake();
  }
  close(): void {
    this.closed = true;
    this.wake();
  }
  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    try {
      for (;;) {
        const item = this.items.shift();
        if (item !== undefined) {
          yield item;
          continue;
        }
        if (this.closed) return;
        await new Promise<void>((resolve) => (this.waiter = resolve));
      }
    } finally {
      // The consumer left (client gone): stop buffering for it.
      this.detached = true;
      this.items = [];
    }
  }
}

/** The conversation the provider sees: markers removed from the last user message. */
function providerMessages(messages: ChatMessage[], scenariosEnabled: boolean): { messages: ChatMessage[]; lastUser: string } {
  let last = -1;
  for (let i = messages.length - 1; i >= 0 && last < 0; i--) if (messages[i].role === 'user') last = i;
  const lastUser = last >= 0 ? messages[last].content : '';
  const out = messages.map((m, i) =>
    i === last ? { role: m.role, content: stripScenarios(m.content, scenariosEnabled) } : { role: m.role, content: m.content },
  );
  return { messages: out, lastUser };
}

/** The rules the schema cannot express and the provider's pre-flight, checked before anything is claimed. */
function admissible(deps: TextDeps, request: ChatCompletionRequest & { max_tokens: number }) {
  const found = deps.catalog.find(request.model);
  const model = found?.kind === 'text' && found.available === true ? found : undefined;
  if (!model) {
    throw new DomainError('MODEL_UNAVAILABLE', `"${request.model}" is not an available text model; list the text models with GET /api/generate/models.`);
  }
  const conversationBytes = Buffer.byteLength(JSON.stringify(request.messages), 'utf8');
  if (conversationBytes > MAX_CONVERSATION_BYTES) {
    throw new DomainError('INVALID_REQUEST', `The serialized conversation is ${conversationBytes} bytes; at most ${MAX_CONVERSATION_BYTES} are allowed.`);
  }
  const { messages, lastUser } = providerMessages(request.messages, deps.scenariosEnabled);
  const { provider, model: providerModel } = deps.providers(model.id);
  const asked: TextGenerationRequest = {
    model: providerModel,
    messages,
    max_tokens: request.max_tokens,
    temperature: request.temperature,
    top_p: request.top_p,
    response_format: request.response_format,
    scenarios: scenarioOf(lastUser, deps.scenariosEnabled),
  };
  if (provider.admit?.(asked) === false) {
    throw spend.providerUnavailable('text provider', 'before-claim', provider.unavailableFor?.());
  }
  return { model, provider, asked };
}

/**
 * Creates a chat completion or replays a completed one. Admission errors are
 * thrown (nothing claimed); once admitted, the outcome arrives through the
 * returned live generation.
 *
 * A completed identity replays before any current check, and a replay never
 * spends a rate token. Step by step that is a read of the record, then the
 * checks and the admission, then the claim. Where the admission may ride with the
 * claim (SQLite, `admitsAtClaim`) the claim itself is the replay read: the
 * tokens' take and the claim leave in one round trip, a claim made before fails
 * there and is replayed (its rollback gives the tokens back), and the checks run
 * after the claim, whose transaction they roll back. A bucket without a token
 * fails that transaction with nothing kept, and the request runs again step by
 * step, which says which limit refused it.
 *
 * Before that transaction, SQLite first makes the tokens' take, the claim and the
 * hold as one prepared statement (`submittedAtOnce`): when it makes them, that is
 * the whole reservation in one round trip; when anything stops it, it wrote
 * nothing and the way above runs as it always did, and answers as it always did.
 */
export async function createChatCompletion(
  deps: TextDeps,
  principal: Principal,
  idemKey: string,
  body: ChatCompletionRequest,
  recorded?: idem.RecordRead,
): Promise<ChatOutcome> {
  // Defaults applied, so an absent `stream` and `stream: false` are the same identity.
  const request = { ...body, stream: body.stream ?? false, max_tokens: body.max_tokens ?? DEFAULT_MAX_TOKENS };
  const identity = spend.identityOf(principal, idemKey, OPERATION, request);
  // A record the request has read already (moderation's) answers without another read.
  if (!recorded?.asked && admitsAtClaim(deps.db)) {
    const made = await submittedAtOnce(deps, principal, identity, request);
    if (made) return made;
    try {
      return await submit(deps, principal, identity, request, true);
    } catch (error) {
      if (!refusedAtClaim(error)) throw error;
    }
  }
  const existing = await idem.lookup(deps.db, identity, recorded);
  if (existing) return { type: 'replay', completion: idem.savedResponse<ChatCompletion>(existing) };
  return submit(deps, principal, identity, request, false);
}

/**
 * Claims and holds, then starts the generation; `atClaim`: the admission rides
 * with the claim and the checks follow it (`createChatCompletion`), else both
 * come first.
 */
async function submit(
  deps: TextDeps,
  principal: Principal,
  identity: idem.Identity,
  request: ChatCompletionRequest & { max_tokens: number },
  atClaim: boolean,
): Promise<ChatOutcome> {
  let admitted = atClaim ? undefined : admissible(deps, request);
  if (!atClaim && deps.limits) await admit(deps.db, deps.clock, deps.limits, principal, 'text');
  const id = `chatcmpl_${crypto.randomBytes(12).toString('hex')}`;
  const reservationId = newId('rsv');
  let amount = 0;
  const claim = await spend.inSubmission(deps.db, deps.clock, identity, async ({ trx, claim, hold }) => {
    if (atClaim && deps.limits) await admitAtClaim(trx, deps.clock, deps.limits, principal);
    await claim({ state: 'pending', ref: id, reservationId }); // until the completion's outcome
    admitted ??= admissible(deps, request);
    amount = conservativeMaximum(admitted.model.pricing, admitted.provider.promptTokenUpperBound(admitted.asked.messages), request.max_tokens);
    return hold({ purpose: 'llm', kind: 'text', amount, maxGems: request.maxGems, ref: id, id: reservationId });
  });
  if (!claim.created) return { type: 'replay', completion: idem.savedResponse<ChatCompletion>(claim.record) };

  const { model, provider, asked } = admitted!;
  const generation = start(deps, {
    id,
    created: Math.floor(deps.clock.now().getTime() / 1000),
    model: model.id,
    claim: { identity, reservationId, reserved: amount, ref: id, held: claim.value },
    rates: model.pricing,
    messages: asked.messages,
    events: provider.generate(asked),
  });
  return { type: 'live', generation };
}

/**
 * The admission, the claim and the hold as one statement (SQLite: spend.ts `claimedAndHeldAtOnce`), then the
 * generation; undefined when it was not made, with nothing written (the caller then takes the way above, which
 * answers as it always did). The checks come first here: they read no record and write nothing, so run before the
 * statement they answer as after the claim; but should one refuse, the statement is not tried, since that refusal
 * is the answer only when the identity was not claimed before (a completed identity replays before any current
 * check), which the way above finds out first.
 */
async function submittedAtOnce(
  deps: TextDeps,
  principal: Principal,
  identity: idem.Identity,
  request: ChatCompletionRequest & { max_tokens: number },
): Promise<ChatOutcome | undefined> {
  let admitted: ReturnType<typeof admissible>;
  try {
    admitted = admissible(deps, request);
  } catch {
    return undefined;
  }
  const { model, provider, asked } = admitted;
  const id = `chatcmpl_${crypto.randomBytes(12).toString('hex')}`;
  const reservationId = newId('rsv');
  const amount = conservativeMaximum(model.pricing, provider.promptTokenUpperBound(asked.messages), request.max_tokens);
  const held = await spend.claimedAndHeldAtOnce(
    deps.db,
    deps.clock,
    identity,
    { state: 'pending', ref: id, reservationId },
    { purpose: 'llm', kind: 'text', amount, maxGems: request.maxGems, ref: id, id: reservationId },
    tokensAtOnce(deps.clock, deps.limits, principal),
  );
  if (!held) return undefined;
  const generation = start(deps, {
    id,
    created: Math.floor(deps.clock.now().getTime() / 1000),
    model: model.id,
    claim: { identity, reservationId, reserved: amount, ref: id, held },
    rates: model.pricing,
    messages: asked.messages,
    events: provider.generate(asked),
  });
  return { type: 'live', generation };
}

/** Measured usage of a conversation and some output, with the server's own tokenizer. */
function measure(messages: ChatMessage[], output: string): Usage {
  return usageOf(chatPromptTokens(messages), countTokens(output));
}

interface Run {
  id: string;
  created: number;
  model: string;
  claim: spend.Claim;
  rates: TextRates;
  messages: ChatMessage[];
  events: AsyncIterable<TextEvent>;
}

/** Starts the generation in the background; it runs to its settlement whoever listens. */
function start(deps: TextDeps, run: Run): LiveGeneration {
  const queue = new EventQueue<GenerationEvent>();
  const result = pump(deps, run, queue).finally(() => queue.close());
  void deps.inflight?.track(result); // tracked for shutdown only: the caller awaits `result` itself
  return { id: run.id, created: run.created, model: run.model, events: queue, result };
}

async function pump(deps: TextDeps, run: Run, queue: EventQueue<GenerationEvent>): Promise<ChatCompletion | DomainError> {
  let text = '';
  let deltas = 0;
  try {
    let finish: { reason: FinishReason; usage: Usage | undefined } | undefined;
    for await (const event of run.events) {
      if (event.type === 'delta') {
        text += event.content;
        deltas++;
        queue.push({ type: 'delta', content: event.content });
      } else {
        finish = { reason: event.finish_reason, usage: event.usage };
        break;
      }
    }
    if (!finish) throw new ProviderError('uncertain', 'The text provider ended without finishing.');
    const completion = await settle(deps, run, text, finish.reason, finish.usage);
    queue.push({ type: 'end', completion });
    return completion;
  } catch (error) {
    const apiError = await fail(deps, run, error, deltas, text);
    queue.push({ type: 'error', error: apiError });
    return apiError;
  }
}

/** Charges the measured usage (the whole reservation when the provider reported none) and retains the response. */
async function settle(deps: TextDeps, run: Run, text: string, reason: FinishReason, reported: Usage | undefined): Promise<ChatCompletion> {
  // Missing usage keeps the conservative reservation (spec); the response then shows our own count.
  const usage = reported ?? measure(run.messages, text);
  const charge = reported ? measuredCharge(run.rates, reported, run.claim.reserved) : run.claim.reserved;
  const completion: ChatCompletion = {
    id: run.id,
    object: 'chat.completion',
    created: run.created,
    model: run.model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: reason }],
    usage,
  };
  await spend.billAndRetain(deps.db, deps.clock, run.claim, charge, { answer: JSON.stringify(completion) });
  return completion;
}

/** Records a failed generation by the spend path's outcome rule and says what the first response reports. */
async function fail(deps: TextDeps, run: Run, error: unknown, deltas: number, text: string): Promise<DomainError> {
  const failure = error instanceof ProviderError ? error.failure : 'uncertain';
  const log = deps.logger.child({ completion: run.id, failure });
  log.warn({ err: error }, 'text generation failed');
  // A part-way failure's usage is known: what the provider reported, else our own count.
  const outcome = spend.outcomeOf(failure, { output: deltas > 0, usage: failure === 'failed' });
  try {
    if (outcome === 'release') {
      const refused = error as ProviderError;
      if (refused.unavailable) {
        // Nothing was done: the identity stays free, so the client's retry of it (the spec's "keep the identity and back off") is dispatched.
        await spend.releaseAndForget(deps.db, deps.clock, run.claim);
        return spend.providerUnavailable('text provider', 'forgotten', refused.retryAfterSeconds ?? 1);
      }
      await spend.release(deps.db, deps.clock, run.claim);
      return spend.providerRejected('text provider');
    }
    if (outcome === 'bill-and-retain') {
      // A definite outcome: bill what was measured and retain the error as the
      // identity's response, so every replay returns it (no new inference, no new
      // charge) instead of leaving the client uncertain.
      const usage = (error as ProviderError).usage ?? measure(run.messages, text);
      const charge = measuredCharge(run.rates, usage, run.claim.reserved);
      const failed = new DomainError(
        'PROVIDER_ERROR',
        `The text provider failed part-way through this completion; the usage measured so far is billed (${charge} Gem${charge === 1 ? '' : 's'}). ` +
          'This outcome is final: replays of this Idempotency-Key return it again with no new inference or charge; to try again, send a new request with a new Idempotency-Key.',
        { final: true },
      );
      await spend.billAndRetain(deps.db, deps.clock, run.claim, charge, { failure: failed });
      return failed;
    }
    await spend.holdUncertain(deps.db, deps.clock, run.claim);
  } catch (recordError) {
    // The record stays pending, which replays also answer REQUEST_UNCERTAIN.
    log.error({ err: recordError }, 'could not record the failed text generation');
  }
  return spend.requestUncertain();
}
