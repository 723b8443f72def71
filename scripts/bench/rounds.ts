/**
 * One benchmark row measured in rounds beside the bare node:http baseline
 * (bench-http.ts, bench-postgres.ts): each round measures the baseline, then
 * the row, each after a warm-up of its own, so a busy machine slows both sides
 * of each round's ratio alike; every figure is the median over the rounds. Several
 * rows can share the rounds (bench-gateway.ts: gemforge, then Portkey, after the proxy).
 */
import { runLoad } from './processes.ts';
import type { Row } from './report.ts';
import type { LoadJob, LoadResult } from './types.ts';

export interface RoundOptions {
  /** Seconds measured per row, split over the rounds. */
  duration: number;
  rounds: number;
  /** Seconds of warm-up before a row's first round. */
  warmup: number;
  /** Seconds of warm-up before each later round (the server sat idle while the other side was measured). */
  rewarm: number;
}

export interface Case {
  name: string;
  connections: number;
  /** Statuses that count as answered (anything else marks the row as not measured). */
  expect: number[];
  job: Omit<LoadJob, 'connections' | 'warmupSeconds' | 'durationSeconds'>;
}

export type Measured = LoadResult & { problem?: string };

/** One load job's measurement of `c`, with what made it not count (no answers, other statuses, errors). */
export async function measure(c: Case, warmupSeconds: number, durationSeconds: number): Promise<Measured> {
  process.stdout.write(`  ${c.name} …`);
  const result = await runLoad<LoadResult>({ ...c.job, connections: c.connections, warmupSeconds, durationSeconds });
  const measured = judged(c, result);
  console.log(` ${result.rps.toFixed(0)} req/s, p99 ${result.p99} ms${measured.problem ? ` (${measured.problem})` : ''}`);
  return measured;
}

/** `result` with the reason it does not measure `c`, if any. */
export function judged(c: Pick<Case, 'expect'>, result: LoadResult): Measured {
  const unexpected = Object.entries(result.statuses).filter(([s]) => !c.expect.includes(Number(s)));
  const problem =
    result.requests === 0 ? 'no answers' : unexpected.length ? `statuses ${JSON.stringify(Object.fromEntries(unexpected))}` : result.errors ? `${result.errors} errors` : undefined;
  return { ...result, ...(problem && { problem }) };
}

export const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Server CPU per request (median over the rounds) and the ratio it implies: baseline CPU per request over this row's. */
function cpu(rounds: Array<{ base: Measured; run: Measured }>): Pick<Row, 'cpuUs' | 'cpuRatio'> {
  const pairs = rounds.filter((r) => r.base.cpuUs && r.run.cpuUs);
  if (pairs.length === 0) return {};
  return { cpuUs: median(pairs.map((r) => r.run.cpuUs!)), cpuRatio: median(pairs.map((r) => r.base.cpuUs! / r.run.cpuUs!)) };
}

/** What one case of a row brings: its name and connections, and how it is measured (default: one load job, `measure`). */
export interface RoundCase {
  c: Pick<Case, 'name' | 'connections'> & Partial<Case>;
  /** A row made of several load jobs at once brings its own. */
  run?: (warmupSeconds: number, seconds: number) => Promise<Measured>;
}

/**
 * Several rows measured in the same rounds: `rounds` rounds of (the baseline, then
 * each case in turn), each duration / rounds seconds after its own warm-up, so every
 * row's ratio is to the baseline of its own rounds. `runs[i][k]` is case i's
 * measurement in round k, for comparing two cases round by round.
 */
export async function rowsInRounds(cases: RoundCase[], baseline: Case, o: RoundOptions): Promise<{ rows: Row[]; runs: Measured[][] }> {
  const seconds = o.duration / o.rounds;
  const bases: Measured[] = [];
  const runs: Measured[][] = cases.map(() => []);
  for (let i = 0; i < o.rounds; i++) {
    bases.push(await measure(baseline, i === 0 ? 1 : o.rewarm, seconds));
    for (const [k, { c, run }] of cases.entries()) {
      const warmup = i === 0 ? o.warmup : o.rewarm;
      runs[k]!.push(await (run ? run(warmup, seconds) : measure(c as Case, warmup, seconds)));
    }
  }
  return { rows: cases.map(({ c }, k) => summed(c, bases, runs[k]!)), runs };
}

/** A row's figures: medians over its rounds, each round's run beside that round's baseline. */
function summed(c: Pick<Case, 'name' | 'connections'>, bases: Measured[], runs: Measured[]): Row {
  const rounds = runs.map((run, i) => ({ base: bases[i]!, run }));
  const statuses: Record<string, number> = {};
  for (const r of runs) for (const [code, n] of Object.entries(r.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
  const problem = runs.find((r) => r.problem)?.problem ?? rounds.map((r) => r.base.problem && `baseline: ${r.base.problem}`).find(Boolean);
  return {
    name: c.name,
    connections: c.connections,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    requests: runs.reduce((n, r) => n + r.requests, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    statuses,
    baselineRps: median(rounds.map((r) => r.base.rps)),
    ratio: median(rounds.map((r) => r.run.rps / r.base.rps)),
    ...cpu(rounds),
    ...(problem && { problem }),
  };
}

/**
 * One row: `rounds` rounds of (the baseline, this case), each duration / rounds
 * seconds after its own warm-up. `run` measures the case (default: one load job,
 * `measure`); a row made of several load jobs at once brings its own.
 */
export async function row(
  c: Pick<Case, 'name' | 'connections'> & Partial<Case>,
  baseline: Case,
  o: RoundOptions,
  run?: (warmupSeconds: number, seconds: number) => Promise<Measured>,
): Promise<Row> {
  return (await rowsInRounds([{ c, ...(run && { run }) }], baseline, o)).rows[0]!;
}
