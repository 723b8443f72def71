/**
 * What a client reads when a remote output fails, written once for every
 * provider: the upstream's own words never reach the client (they may carry a
 * key, a private URL, or text nobody reviewed), only one of these sentences,
 * naming who failed ("The video provider") and what it costs ("nothing was
 * charged"). The content-policy rule, which of an upstream's error texts count
 * as a content refusal, lives here too.
 */

/** An upstream error text that says the request was refused under a content or safety policy. */
const CONTENT_POLICY = /content[_ ]policy|safety (system|checker)|nsfw|moderation|unsafe content|flagged as sensitive/i;

/** Whether an upstream's error text is a content-policy refusal. */
export function isContentPolicy(text: unknown): boolean {
  return typeof text === 'string' && CONTENT_POLICY.test(text);
}

export const say = {
  /** A creating call refused before any work: the upstream's status picks the sentence. */
  refused(who: string, status: number, body: string): string {
    if (isContentPolicy(body)) return `${who} refused the request under its content policy; nothing was charged.`;
    if (status === 401 || status === 403) return `${who} refused this server's credentials; nothing was charged.`;
    if (status === 404) return `${who} does not know the configured upstream model; nothing was charged.`;
    return `${who} refused the request (HTTP ${status}); nothing was charged.`;
  },
  unavailable: (who: string, reason: string) => `${who} was unavailable (${reason}); nothing was charged.`,
  /** An asynchronous job that ended failed (`error`: the upstream's text, only classified). */
  failed: (who: string, error: unknown) =>
    `${who} could not make this output${isContentPolicy(error) ? ' under its content policy' : ''}; nothing was charged for it.`,
  canceled: (who: string) => `${who} cancelled this output; nothing was charged for it.`,
  aborted: (who: string) => `${who} aborted this output before it started; nothing was charged for it.`,
  noOutput: (who: string) => `${who} returned no output; nothing was charged for it.`,
  malformed: (who: string) => `${who} returned a malformed answer; nothing was charged for this output.`,
  /** Held, not failed: a 2xx to a creating call that carries no readable output may follow work done (and billed) upstream. */
  unreadable: (who: string, what: string) =>
    `${who} answered a creating call with ${what}; the work may have been done (and charged) upstream, so its outcome cannot be known`,
  tooSlow: (who: string, deadlineMs: number, job: string) =>
    `${who} did not finish within ${Math.round(deadlineMs / 1000)} s; the ${job} was cancelled and nothing was charged.`,
};
