/**
 * The moderation provider interface, shared by the embedded term policy and the
 * OpenAI-compatible adapter, and by the domain step that calls them (providers
 * import nothing from the domain; the domain imports these types).
 */

/** An account's content preference: `strict` applies the strict categories too. */
export type ContentPreference = 'standard' | 'strict';
export const CONTENT_PREFERENCES: readonly ContentPreference[] = ['standard', 'strict'];

/** One piece of user text and where it came from (`prompt`, `messages[2].content`, …). */
export interface ModerationText {
  field: string;
  text: string;
}

export interface ModerationInput {
  texts: ModerationText[];
  preference: ContentPreference;
}

/** A refusal: the first refused text's field and every category it breaks. */
export interface ModerationFlag {
  field: string;
  categories: string[];
}

/** A text the provider could not judge: written in a language its policy does not read. */
export interface ModerationUnjudged {
  field: string;
  /** ISO 639-1 code (`es`, `fr`, …), or `und` for a script other than Latin. */
  language: string;
}

export interface ModerationVerdict {
  /** Which provider decided (`embedded`, `openai-compatible`, `embedded+openai-compatible`). */
  provider: string;
  /** Undefined when every text is allowed. */
  flagged: ModerationFlag | undefined;
  /** When nothing is flagged: the first text the provider could not judge (the account's preference decides). */
  unjudged?: ModerationUnjudged | undefined;
}

export interface ModerationProvider {
  readonly name: string;
  /** Decides on every text, or throws ModerationUnavailableError. */
  moderate(input: ModerationInput): Promise<ModerationVerdict>;
}

/**
 * The moderation service failed or could not be reached: nothing can be decided (a server-side error).
 * `busy`: the server's own moderation threads are all taken and their queue is full (or the thread
 * judging the text failed); the caller backs off and retries with the same identity.
 */
export class ModerationUnavailableError extends Error {
  override name = 'ModerationUnavailableError';
  constructor(
    message: string,
    readonly kind: 'unreachable' | 'upstream' | 'busy',
  ) {
    super(message);
  }
}
