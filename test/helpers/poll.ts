/**
 * Waiting for what another process, a real timer or real I/O does. A fixed
 * sleep "to let it happen" is slow when the thing is quick and flaky when the
 * machine is loaded; asking again until it has happened, within a deadline, is
 * neither. (Time the server reads from its Clock is moved with a test clock
 * instead: helpers/db.ts ManualClock and OffsetClock.)
 */

/** What a probe answers while the awaited thing has not happened yet. */
type NotYet = undefined | false;

/**
 * Calls `probe` every `everyMs` until it answers something other than
 * `undefined` or `false`, and returns that; throws naming `what` when
 * `timeoutMs` pass first.
 */
export async function until<T>(what: string, probe: () => Promise<T | NotYet> | T | NotYet, timeoutMs = 30_000, everyMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
