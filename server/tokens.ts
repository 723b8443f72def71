/**
 * Token counting with a real BPE tokenizer (gpt-tokenizer, o200k_base). The
 * local text provider measures its usage with it; the text use case uses it
 * for the conservative input bound and for measuring partial output. It sits
 * beside both (not in either) so neither imports the other's modules.
 */
import { createRequire } from 'node:module';

/**
 * gpt-tokenizer, loaded at its first use: its o200k tables cost ~29 MB of heap
 * (~75 MB resident) and most of a second to load, and a server whose text goes
 * to an upstream that reports usage may never count a token. `require` keeps
 * the API synchronous (the package ships CommonJS beside its ESM).
 */
let bpe: typeof import('gpt-tokenizer') | undefined;
const tokenizer = () => (bpe ??= createRequire(import.meta.url)('gpt-tokenizer') as typeof import('gpt-tokenizer'));
const bpeCount = (text: string) => tokenizer().countTokens(text);
const encode = (text: string) => tokenizer().encode(text);
const decode = (tokens: Iterable<number>) => tokenizer().decode(tokens);

export interface ChatLikeMessage {
  role: string;
  content: string;
}

/** Tokens added per message by the chat framing (`<|start|>role<|message|>…<|end|>`). */
const PER_MESSAGE = 3;
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMING = 3;

export function countTokens(text: string): number {
  return text.length === 0 ? 0 : bpeCount(text);
}

export function encodeText(text: string): number[] {
  return encode(text);
}

/** The prompt tokens of a conversation, as the local model counts them (usage `prompt_tokens`). */
export function chatPromptTokens(messages: ChatLikeMessage[]): number {
  let total = REPLY_PRIMING;
  for (const m of messages) total += PER_MESSAGE + countTokens(m.role) + countTokens(m.content);
  return total;
}

/**
 * An upper bound of the prompt tokens of a conversation under any byte-level
 * tokenizer (every token covers at least one UTF-8 byte), plus a generous
 * framing allowance per message: what a remote model can charge at most.
 */
export function chatPromptTokenUpperBound(messages: ChatLikeMessage[]): number {
  let total = 16;
  for (const m of messages) total += 8 + Buffer.byteLength(m.role, 'utf8') + Buffer.byteLength(m.content, 'utf8');
  return total;
}

/**
 * Splits text into deltas of whole tokens for streaming. A token that ends in
 * the middle of a multi-byte character is joined with the next ones, so every
 * delta is valid text and the deltas concatenate to `decode(tokens)`. A group of
 * tokens is complete when its decoding is what the whole decoding holds at that
 * place (a cut character decodes to U+FFFD where the whole text has the
 * character), so a real U+FFFD in the text is just a character.
 */
export function* tokenDeltas(tokens: number[]): Generator<{ text: string; tokens: number }> {
  const whole = decode(tokens);
  let at = 0;
  let pending: number[] = [];
  for (const t of tokens) {
    pending.push(t);
    const text = decode(pending);
    if (!whole.startsWith(text, at)) continue;
    yield { text, tokens: pending.length };
    at += text.length;
    pending = [];
  }
  if (pending.length) yield { text: whole.slice(at), tokens: pending.length };
}

export { decode as decodeTokens };
