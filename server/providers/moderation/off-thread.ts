/**
 * Long texts judged off the event loop. The embedded policy reads a text in
 * time linear in its length, but a 30,000-character hostile prompt still costs
 * a few tens of ms of CPU, and a conversation up to 128,000 characters more:
 * on the server's main thread every other request (`/healthz` included) would
 * wait that long behind it. Texts whose characters together reach `minChars`
 * go to a pool of worker threads (threads.ts: at most `threads` at once, `queue`
 * more waiting, then 503 TEMPORARILY_UNAVAILABLE with Retry-After); shorter ones,
 * the everyday case, are judged in process, where a round trip to a thread
 * would cost more than the judgment.
 *
 * Each worker builds its policy from the document the server's was built from
 * (not the file, which may have changed since the start) and judges with the
 * same entry point (`embeddedProvider`, index.ts), so both give the same decisions
 * (test/unit/moderation-off-thread.test.ts holds them to it). The threads start at
 * the first long text, not with the server (each holds the policy and the
 * dictionary, some tens of MB), and end with it or after IDLE_MS without a text.
 */
import { threadPool, type PoolSettings, type ThreadPool } from '../../threads.ts';
import { embeddedProvider } from './index.ts';
import { policyDocument, type ModerationPolicy, type PolicyDocument } from './policy-file.ts';
import { ModerationUnavailableError, type ModerationInput, type ModerationProvider, type ModerationVerdict } from './types.ts';

/** How the threads run (config: MODERATION_THREADS, MODERATION_THREAD_QUEUE, MODERATION_THREAD_MIN_CHARS). */
export interface OffThreadSettings extends PoolSettings {
  /** Texts of at least this many characters together are judged on a thread; 0: all of them. */
  minChars: number;
  /** How long a thread may go without a text before it ends (IDLE_MS). */
  idleMs?: number;
}

/**
 * A thread with no text for five minutes ends, so a server that judged a burst of long texts
 * gives their threads' memory back (~35 MB each); the next long text waits for a thread to
 * start again (about a second, on the thread, not the event loop).
 */
export const IDLE_MS = 5 * 60_000;

/** What a moderation worker is started with: the document the server's policy was built from, and whether the classifier judges too. */
export interface ModerationWorkerData extends PolicyDocument {
  classifier: boolean;
}

const workerModule = new URL('./moderation-worker.ts', import.meta.url).href;

/**
 * The embedded provider of `policy` (`embeddedProvider`, with the classifier or without) whose short
 * texts are judged in process and long ones by its twin on a worker thread, built there from the
 * document `policy` was built from; `close` ends the threads, `threads` counts them. Both twins are
 * built here from the same policy and flag, so they cannot disagree on either.
 */
export function offThread(
  policy: ModerationPolicy,
  settings: OffThreadSettings & { classifier: boolean },
): ModerationProvider & Omit<ThreadPool<never, never>, 'run'> {
  const inProcess = embeddedProvider(policy, { classifier: settings.classifier });
  const pool = threadPool<ModerationInput, ModerationVerdict>(workerModule, settings, {
    busy: () => new ModerationUnavailableError('every moderation thread is busy and their queue is full', 'busy'),
    // A thread that failed or died on a text: nothing was decided; the caller may retry.
    failed: (reason) => new ModerationUnavailableError(`the moderation thread failed: ${reason}`, 'busy'),
    inline: (input) => inProcess.moderate(input),
    thread: { workerData: { ...policyDocument(policy), classifier: settings.classifier } satisfies ModerationWorkerData },
    idleMs: settings.idleMs ?? IDLE_MS,
  });
  return {
    name: inProcess.name,
    moderate(input) {
      let chars = 0;
      for (const { text } of input.texts) chars += text.length;
      return chars < settings.minChars ? inProcess.moderate(input) : pool.run(input);
    },
    close: () => pool.close(),
    threads: () => pool.threads(),
  };
}
