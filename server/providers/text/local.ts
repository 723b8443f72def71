/**
 * The embedded text provider: a local, deterministic stand-in. It is NOT a
 * language model. It composes its answer from the conversation (restates and
 * transforms the last user message, notes the system instructions), honours
 * `max_tokens` by real token count, answers valid JSON for `json_object` (when
 * not cut short), and streams token by token at a configurable pace. The same
 * request always gets the same answer; `temperature` and `top_p` change nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { chatPromptTokens, countTokens, encodeText, tokenDeltas } from '../../tokens.ts';
import { usageOf, type ChatMessage, type TextEvent, type TextGenerationRequest, type TextProvider } from './types.ts';

const NOTE = 'Gemforge local stand-in: not a language model; this answer is composed from your message.';

function lastUserMessage(messages: ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === 'user') return messages[i].content;
  return messages[messages.length - 1]?.content ?? '';
}

function systemInstructions(messages: ChatMessage[]): string | null {
  const text = messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content.trim())
    .filter(Boolean)
    .join('\n');
  return text ? text : null;
}

const words = (text: string) => text.split(/\s+/).filter(Boolean);
const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

/** The whole answer the stand-in gives to a conversation (before any `max_tokens` cut). */
export function composeAnswer(messages: ChatMessage[], format: 'text' | 'json_object' = 'text'): string {
  const said = lastUserMessage(messages).trim();
  const system = systemInstructions(messages);
  const w = words(said);
  const earlier = messages.length - 1;
  if (format === 'json_object') {
    return JSON.stringify({
      note: NOTE,
      restated: said,
      upper: said.toUpperCase(),
      reversedWords: [...w].reverse().join(' '),
      words: w.length,
      characters: [...said].length,
      systemInstructions: system,
      earlierMessages: earlier,
    });
  }
  const lines = [
    NOTE,
    '',
    `You said: "${said}"`,
    '',
    `In upper case: ${said.toUpperCase()}`,
    `Words in reverse order: ${[...w].reverse().join(' ')}`,
    `That is ${w.length} word${w.length === 1 ? '' : 's'}, ${[...said].length} characters and ${countTokens(said)} tokens.`,
  ];
  if (system) lines.push('', `System instructions noted (not followed, this is no model): "${clip(system, 400)}"`);
  if (earlier > 0) lines.push('', `The conversation had ${earlier} earlier message${earlier === 1 ? '' : 's'}.`);
  return lines.join('\n');
}

export interface LocalProviderOptions {
  /** Pause between streamed tokens in milliseconds (TEXT_STREAM_DELAY_MS). */
  delayMs: number;
}

export class LocalTextProvider implements TextProvider {
  readonly name = 'local';
  constructor(private readonly options: LocalProviderOptions) {}

  /** Exact: the local model counts its prompt with the same tokenizer. */
  promptTokenUpperBound(messages: ChatMessage[]): number {
    return chatPromptTokens(messages);
  }

  async *generate(request: TextGenerationRequest): AsyncGenerator<TextEvent> {
    const all = encodeText(composeAnswer(request.messages, request.response_format?.type));
    const cut = all.length > request.max_tokens;
    const tokens = cut ? all.slice(0, request.max_tokens) : all;
    let emitted = 0;
    for (const delta of tokenDeltas(tokens)) {
      if (this.options.delayMs > 0) await sleep(this.options.delayMs);
      else if (emitted % 64 === 0) await new Promise((resolve) => setImmediate(resolve));
      emitted += delta.tokens;
      yield { type: 'delta', content: delta.text };
    }
    yield {
      type: 'finish',
      finish_reason: cut ? 'length' : 'stop',
      usage: usageOf(chatPromptTokens(request.messages), emitted),
    };
  }
}
