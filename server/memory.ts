/**
 * Gives memory back once the server goes quiet. A start (the contract parsed,
 * the validator compiled, the moderation policy built) and any burst of
 * requests leave V8 with a young generation grown to its 2 × 32 MiB limit
 * (node-flags.ts) and an old generation full of garbage; V8's own memory
 * reducer returns them only after minutes of idleness, so a server just started
 * sat at ~220 MB resident with ~30 MB of live heap. When no request has arrived
 * for a whole period and none is in flight, and there were requests (or the
 * start) since the last time, one memory-reducing collection runs (V8's
 * "last resort" flavour: full collections until nothing more is freed, the
 * young generation shrunk): a pause of tens of milliseconds that no request
 * waits on. Under steady traffic it never runs, so it costs a request one
 * counter increment.
 *
 * Needs Node's `--expose-gc` (SERVER_NODE_FLAGS); without it (a server started
 * in-process by the tests) it does nothing.
 */
import type http from 'node:http';

export type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** How long without a request counts as quiet. */
export const QUIET_MS = 2000;

export interface QuietOptions {
  /** How long without a request counts as quiet (QUIET_MS). */
  quietMs?: number;
  /** The collection to run (Node's `gc`, present under --expose-gc). */
  collect?: Collect;
  /** Told how long each collection took. */
  onCollect?: (ms: number) => void;
}

/** Starts watching `server`; `busy()` says whether a response is still in flight. Returns the stop. */
export function reduceMemoryWhenQuiet(server: http.Server, busy: () => boolean, options: QuietOptions = {}): () => void {
  const collect = options.collect ?? (globalThis as { gc?: Collect }).gc;
  if (typeof collect !== 'function') return () => undefined;
  const quietMs = options.quietMs ?? QUIET_MS;
  let requests = 0;
  let seen = 0;
  let dirty = true; // the start's own garbage
  // When the count last moved (or a response was last seen in flight), as the timer saw it.
  let quietSince = Date.now();
  const count = () => requests++;
  server.on('request', count);
  // Looked at four times a period, so the collection runs between one and 1.25 quiet periods
  // after the last request: looking once a period made it anywhere from one to two, and a
  // server asked about 3 s after a request still held the burst's memory half the time.
  const timer = setInterval(() => {
    if (requests !== seen || busy()) {
      seen = requests;
      dirty = true;
      quietSince = Date.now();
      return;
    }
    if (!dirty || Date.now() - quietSince < quietMs) return;
    dirty = false;
    const started = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    options.onCollect?.(performance.now() - started);
  }, quietMs / 4);
  timer.unref();
  return () => {
    clearInterval(timer);
    server.off('request', count);
  };
}
