/**
 * The bench's table and targets: every row as req/s, p50, p99 and
 * its ratio to bare `node:http` measured in the same run; every target as PASS
 * or MISS.
 */
import type { LoadResult } from './types.ts';

export interface Row extends LoadResult {
  name: string;
  connections: number;
  /** req/s of bare node:http measured just before this row. */
  baselineRps: number;
  /** Fraction of that baseline. */
  ratio: number;
  /** The server's CPU time per request in µs (Linux). */
  cpuUs?: number;
  /**
   * The baseline's CPU per request over this row's: the req/s ratio to expect
   * where the server's core is the bottleneck, little moved by a busy machine.
   */
  cpuRatio?: number;
  /** Responses outside the expected statuses, or transport errors: the row did not measure what it says. */
  problem?: string;
}

export interface Target {
  name: string;
  /** The measured value and the bound, as printed. */
  measured: string;
  bound: string;
  pass: boolean;
}

const pct = (r: number) => `${(r * 100).toFixed(2)} %`;

/** The targets, read from the rows by name. */
export function targets(rows: Row[]): Target[] {
  const by = (name: string) => rows.find((r) => r.name === name);
  const out: Target[] = [];
  const ratio = (row: string, min: number) => {
    const r = by(row);
    const byCpu = r?.cpuRatio === undefined ? '' : ` (by CPU ${pct(r.cpuRatio)})`;
    if (r) out.push({ name: `${row}: ratio`, measured: pct(r.ratio) + byCpu, bound: `≥ ${pct(min)}`, pass: !r.problem && r.ratio >= min });
  };
  const p99 = (row: string, maxMs: number) => {
    const r = by(row);
    if (r) out.push({ name: `${row}: p99`, measured: `${r.p99} ms`, bound: `≤ ${maxMs} ms`, pass: !r.problem && r.p99 <= maxMs });
  };
  ratio('task GET', 0.06);
  p99('task GET', 25);
  ratio('models GET', 0.1);
  ratio('401 without key', 0.15);
  ratio('image new identity', 0.015);
  p99('image new identity', 50);
  const task = by('task GET');
  const prism = by('Prism task GET');
  if (task && prism) {
    // Ratio over ratio: each was measured beside its own baseline, so machine noise cancels.
    const times = task.ratio / prism.ratio;
    const byCpu = task.cpuRatio && prism.cpuRatio ? ` (by CPU ${(task.cpuRatio / prism.cpuRatio).toFixed(2)}×)` : '';
    out.push({ name: 'task GET vs Prism task GET', measured: `${times.toFixed(2)}×${byCpu}`, bound: '≥ 2.50×', pass: !task.problem && !prism.problem && times >= 2.5 });
  }
  return out;
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
}

/** The rows and targets as plain-text tables. */
export function render(rows: Row[], checks: Target[]): string {
  const head = ['path', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'node:http req/s', 'ratio', 'CPU µs/req', 'ratio by CPU'];
  const cells = rows.map((r) => [
    r.name + (r.problem ? `  (!) ${r.problem}` : ''),
    String(r.connections),
    r.rps.toFixed(0),
    String(r.p50),
    String(r.p99),
    r.baselineRps.toFixed(0),
    pct(r.ratio),
    r.cpuUs === undefined ? '-' : String(r.cpuUs),
    r.cpuRatio === undefined ? '-' : pct(r.cpuRatio),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const lines = [pad(head, widths), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map((c) => pad(c, widths)), ''];
  for (const t of checks) lines.push(`${t.pass ? 'PASS' : 'MISS'}  ${t.name}: ${t.measured} (target ${t.bound})`);
  return lines.join('\n');
}
