/**
 * Text generation (issue 7): the chat-completions use case.
 *
 *   check what the schema cannot (model, conversation size, scenario 503)
 *   → quote a conservative whole-Gem maximum
 *   → claim the identity and reserve in one transaction (idempotency.submit, state pending)
 *   → run the provider in the background, independent of the client
 *   → settle the measured usage (≤ the reservation) and complete the identity
 *     with the saved response in one transaction.
 *
 * Money rules live in ledger.ts and replay rules in idempotency.ts; this module
 * only calls them. A client that disconnects does not stop the generation: it
 * still settles and its result is retained for replay.
 */
import crypto from 'node:crypto';
import type { components, operations } from '../../generated/api.ts';
import { ApiError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { inTransaction, type Db, type Tx } from '../storage/db.ts';
import type { Principal } from './accounts.ts';
import type { Catalog } from './catalog.ts';
import type { Clock } from './clock.ts';
import * as idem from './idempotency.ts';
import type { InflightWork } from '../lifecycle.ts';
import * as ledger from './ledger.ts';
import { findScenario, scenarioOf, stripScenarios, TEXT_SCENARIOS } from './scenarios.ts';
import { chatPromptTokens, countTokens } from './tokens.ts';
import {
  ProviderError,
  usageOf,
  type ChatMessage,
  type FinishReason,
  type TextEvent,
  type TextProviders,
  type Usage,
} from '../providers/text/index.ts';

export type ChatCompletionRequest = operations['createChatCompletion']['requestBody']['content']['application/json'];
export type ChatCompletion = components['schemas']['ChatCompletion'];

export const OPERATION = 'createChatCompletion';
/** Spec Limits: the serialized conversation (`JSON.stringify(messages)`) in UTF-8 bytes. */
export const MAX_CONVERSATION_BYTES = 128_000;
export const DEFAULT_MAX_TOKENS = 4096;
/** Deltas a scenario lets through before it fails the stream (overridable: `[[scenario:stream-error:N]]`). */
const SCENARIO_DELTAS = 4;

export interface TextRates {
  inputPerThousandTokens: number;
  outputPerThousandTokens: number;
}

export interface TextDeps {
  db: Db;
  clock: Clock;
  catalog: Catalog;
  logger: Logger;
  providers: TextProviders;
  scenariosEnabled: boolean;
  /** Where a running generation is registered so a shutdown can wait for its settlement. */
  inflight?: InflightWork;
}

// Rates can be fractional: keep float noise (1.0000000002) from adding a whole Gem.
const ceilGems = (x: number) => Math.ceil(x - 1e-9);

/** The reservation: ceil((input bound × input rate + max_tokens × output rate) / 1000), at least 1 Gem. */
export function conservativeMaximum(rates: TextRates, promptTokenBound: number, maxTokens: number): number {
  const cost = (promptTokenBound * rates.inputPerThousandTokens + maxTokens * rates.outputPerThousandTokens) / 1000;
  return Math.max(1, ceilGems(cost));
}

/** The charge for measured usage: ceil(measured cost) in whole Gems (the ledger clamps it to the reservation). */
export function measuredCharge(rates: TextRates, usage: Usage): number {
  return Math.max(0, ceilGems((usage.prompt_tokens * rates.inputPerThousandTokens + usage.completion_tokens * rates.outputPerThousandTokens) / 1000));
}

/** One step of a live generation, in order: deltas, then `end` (settled) or `error`. */
export type GenerationEvent =
  | { type: 'delta'; content: string }
  | { type: 'end'; completion: ChatCompletion }
  | { type: 'error'; error: ApiError };

export interface LiveGeneration {
  id: string;
  created: number;
  model: string;
  /** The events as they happen; a consumer may stop early, the generation goes on. */
  events: AsyncIterable<GenerationEvent>;
  /** The settled completion, or the error the first response reports. Never rejects. */
  result: Promise<ChatCompletion | ApiError>;
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

function ratesOf(pricing: Record<string, unknown>, model: string): TextRates {
  const input = pricing.inputPerThousandTokens;
  const output = pricing.outputPerThousandTokens;
  if (typeof input !== 'number' || typeof output !== 'number' || input < 0 || output < 0) {
    throw new Error(`catalog: text model ${model} needs pricing.inputPerThousandTokens and outputPerThousandTokens`);
  }
  return { inputPerThousandTokens: input, outputPerThousandTokens: output };
}

/** The conversation the provider sees: markers removed from the last user message. */
function providerMessages(messages: ChatMessage[], scenariosEnabled: boolean): { messages: ChatMessage[]; lastUser: string } {
  let last = -1;
  for (let i = messages.length - 1; i >= 0 && last < 0; i--) if (messages[i].role === 'user') last = i;
  const lastUser = last >= 0 ? messages[last].content : '';
  const out = messages.map((m, i) => (i === last ? { role: m.role, content: stripScenarios(m.content, scenariosEnabled) } : { role: m.role, content: m.content }));
  return { messages: out, lastUser };
}

/** The rules the schema cannot express, checked before anything is claimed. */
function admissible(deps: TextDeps, request: ChatCompletionRequest) {
  const model = deps.catalog.find(request.model);
  if (!model || model.kind !== 'text' || model.available !== true) {
    throw new ApiError(422, 'MODEL_UNAVAILABLE', `"${request.model}" is not an available text model; list the text models with GET /api/generate/models.`);
  }
  const conversationBytes = Buffer.byteLength(JSON.stringify(request.messages), 'utf8');
  if (conversationBytes > MAX_CONVERSATION_BYTES) {
    throw new ApiError(422, 'INVALID_REQUEST', `The serialized conversation is ${conversationBytes} bytes; at most ${MAX_CONVERSATION_BYTES} are allowed.`);
  }
  const { messages, lastUser } = providerMessages(request.messages, deps.scenariosEnabled);
  const scenarios = scenarioOf(lastUser, deps.scenariosEnabled);
  if (findScenario(scenarios, TEXT_SCENARIOS.providerUnavailable)) {
    throw new ApiError(503, 'PROVIDER_UNAVAILABLE', 'The text provider is unavailable (scenario provider-unavailable); nothing was claimed. Retry later with the same Idempotency-Key.');
  }
  return { model, messages, scenarios };
}

/**
 * Creates a chat completion or replays a completed one. Admission errors are
 * thrown (nothing claimed); once admitted, the outcome arrives through the
 * returned live generation.
 */
export async function createChatCompletion(
  deps: TextDeps,
  principal: Principal,
  idemKey: string,
  body: ChatCompletionRequest,
): Promise<ChatOutcome> {
  // Defaults applied, so an absent `stream` and `stream: false` are the same identity.
  const request = { ...body, stream: body.stream ?? false, max_tokens: body.max_tokens ?? DEFAULT_MAX_TOKENS };
  const identity: idem.Identity = {
    keyId: principal.key.id,
    accountId: principal.account.id,
    idemKey,
    operation: OPERATION,
    fingerprint: idem.fingerprint(request),
  };
  // A completed identity replays before any current check (its result is retained).
  const existing = await idem.lookup(deps.db, identity);
  if (existing) return { type: 'replay', completion: idem.savedResponse<ChatCompletion>(existing) };

  const { model, messages, scenarios } = admissible(deps, request);
  const rates = ratesOf(model.pricing, model.id);
  const { provider, model: providerModel } = deps.providers(model.id);
  const amount = conservativeMaximum(rates, provider.promptTokenUpperBound(messages), request.max_tokens);
  const id = `chatcmpl_${crypto.randomBytes(12).toString('hex')}`;

  const claim = await idem.submit(deps.db, deps.clock, identity, async (trx: Tx) => {
    const rsv = await ledger.reserveTx(trx, deps.clock, {
      accountId: principal.account.id,
      keyId: principal.key.id,
      purpose: 'llm',
      amount,
      maxGems: request.maxGems,
      ref: id,
    });
    return { value: rsv, outcome: { state: 'pending' as const, ref: id, reservationId: rsv.id } };
  });
  if (!claim.created) return { type: 'replay', completion: idem.savedResponse<ChatCompletion>(claim.record) };

  const scenario = findScenario(scenarios, TEXT_SCENARIOS.streamError) ?? findScenario(scenarios, TEXT_SCENARIOS.uncertain);
  const events = provider.generate({
    model: providerModel,
    messages,
    max_tokens: request.max_tokens,
    temperature: request.temperature,
    top_p: request.top_p,
    response_format: request.response_format,
  });
  const generation = start(deps, {
    id,
    created: Math.floor(deps.clock.now().getTime() / 1000),
    model: model.id,
    identity,
    reservationId: claim.value.id,
    reserved: amount,
    rates,
    messages,
    events: scenario ? withScenario(events, scenario.name, Number(scenario.args[0]) || SCENARIO_DELTAS, messages) : events,
  });
  return { type: 'live', generation };
}

/** Measured usage of a conversation and some output, with the server's own tokenizer. */
function measure(messages: ChatMessage[], output: string): Usage {
  return usageOf(chatPromptTokens(messages), countTokens(output));
}

/** Scenario triggers: let a few deltas through, then fail the way the marker asks. */
async function* withScenario(events: AsyncIterable<TextEvent>, name: string, deltas: number, messages: ChatMessage[]): AsyncGenerator<TextEvent> {
  let text = '';
  let seen = 0;
  for await (const event of events) {
    if (event.type !== 'delta') break;
    yield event;
    text += event.content;
    if (++seen >= deltas) break;
  }
  if (name === TEXT_SCENARIOS.streamError) {
    throw new ProviderError('failed', 'The text provider failed part-way (scenario stream-error).', { usage: measure(messages, text) });
  }
  throw new ProviderError('uncertain', 'The outcome of this generation is unknown (scenario uncertain).');
}

interface Run {
  id: string;
  created: number;
  model: string;
  identity: idem.Identity;
  reservationId: string;
  reserved: number;
  rates: TextRates;
  messages: ChatMessage[];
  events: AsyncIterable<TextEvent>;
}

/** Starts the generation in the background; it runs to its settlement whoever listens. */
function start(deps: TextDeps, run: Run): LiveGeneration {
  const queue = new EventQueue<GenerationEvent>();
  const result = pump(deps, run, queue).finally(() => queue.close());
  deps.inflight?.track(result);
  return { id: run.id, created: run.created, model: run.model, events: queue, result };
}

async function pump(deps: TextDeps, run: Run, queue: EventQueue<GenerationEvent>): Promise<ChatCompletion | ApiError> {
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
  const charge = reported ? Math.min(measuredCharge(run.rates, reported), run.reserved) : run.reserved;
  const completion: ChatCompletion = {
    id: run.id,
    object: 'chat.completion',
    created: run.created,
    model: run.model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: reason }],
    usage,
  };
  await inTransaction(deps.db, async (trx) => {
    await ledger.close(trx, deps.clock, run.reservationId, charge);
    await idem.complete(trx, deps.clock, run.identity, { ref: run.id, responseStatus: 200, responseBody: JSON.stringify(completion) });
  });
  return completion;
}

const uncertainError = () =>
  new ApiError(
    409,
    'REQUEST_UNCERTAIN',
    'The outcome of this completion is unknown and its reservation stays held. Keep the Idempotency-Key and body and check again later with backoff; it will not be dispatched again.',
  );

/** Records a failed generation by its failure class and says what the first response reports. */
async function fail(deps: TextDeps, run: Run, error: unknown, deltas: number, text: string): Promise<ApiError> {
  const failure = error instanceof ProviderError ? error.failure : 'uncertain';
  const log = deps.logger.child({ completion: run.id, failure });
  log.warn({ err: error }, 'text generation failed');
  try {
    if (failure === 'refused' && deltas === 0) {
      // Certainly no work: release everything; replays answer REQUEST_FAILED.
      await inTransaction(deps.db, async (trx) => {
        await ledger.close(trx, deps.clock, run.reservationId, 0);
        await idem.markReleased(trx, deps.clock, run.identity);
      });
      const unavailable = (error as ProviderError).unavailable;
      return unavailable
        ? new ApiError(503, 'PROVIDER_UNAVAILABLE', 'The text provider is unavailable; nothing was charged. This identity is closed: a replay answers REQUEST_FAILED.')
        : new ApiError(502, 'PROVIDER_ERROR', 'The text provider rejected the request; nothing was charged. This identity is closed: a replay answers REQUEST_FAILED.');
    }
    if (failure === 'failed') {
      // Part-way failure with known usage: a definite outcome. Bill what was measured
      // and retain the error as the identity's response, so every replay returns it
      // (no new inference, no new charge) instead of leaving the client uncertain.
      const usage = (error as ProviderError).usage ?? measure(run.messages, text);
      const charge = Math.min(measuredCharge(run.rates, usage), run.reserved);
      const failed = new ApiError(
        502,
        'PROVIDER_ERROR',
        `The text provider failed part-way through this completion; the usage measured so far is billed (${charge} Gem${charge === 1 ? '' : 's'}). ` +
          'This outcome is final: replays of this Idempotency-Key return it again with no new inference or charge; to try again, send a new request with a new Idempotency-Key.',
        { final: true },
      );
      await inTransaction(deps.db, async (trx) => {
        await ledger.close(trx, deps.clock, run.reservationId, charge);
        await idem.complete(trx, deps.clock, run.identity, { ref: run.id, responseStatus: 502, responseBody: JSON.stringify(failed.toEnvelope()) });
      });
      return failed;
    }
    // Work may have happened and its usage is unknown: keep the reservation held.
    await idem.markUncertain(deps.db, deps.clock, run.identity);
  } catch (recordError) {
    // The record stays pending, which replays also answer REQUEST_UNCERTAIN.
    log.error({ err: recordError }, 'could not record the failed text generation');
  }
  return uncertainError();
}
