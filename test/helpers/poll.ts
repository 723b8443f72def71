/**
 * Waiting for what another process, a real timer or real I/O does. A fixed
 * sleep "to let it happen" is slow when the thing is quick and flaky when the
 * machine is loaded; asking again until it has happened, within a deadline, is
 * neither. (Time the server reads from its Clock is moved with a test clock
 * instead: helpers/db.ts ManualClock and OffsetClock.)
 */

/**
 * How much longer than its nominal bound a wait may take before it fails: a
 * bound only matters when the awaited thing never happens (a wait ends as soon
 * as it does), and a runner shared with other jobs (load average 14–27 seen)
 * can be many times slower than a quiet one. TEST_PATIENCE overrides it. A test
 * that promises speed belongs in a benchmark (scripts/bench*.ts), not here.
 */
export const PATIENCE = Math.max(1, Number(process.env.TEST_PATIENCE) || 4);

/** A wait's outer bound: its nominal `ms` times PATIENCE. */
export const patiently = (ms: number): number => ms * PATIENCE;

/** What a probe answers while the awaited thing has not happened yet. */
type NotYet = undefined | false;

/**
 * Calls `probe` every `everyMs` until it answers something other than
 * `undefined` or `false`, and returns that; throws naming `what` when
 * `timeoutMs` (times PATIENCE) pass first.
 */
export async function until<T>(what: string, probe: () => Promise<T | NotYet> | T | NotYet, nominalMs = 30_000, everyMs = 50): Promise<T> {
  const timeoutMs = patiently(nominalMs);
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
