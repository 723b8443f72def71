/**
 * The designer's loop: how long from a contract edit to a server that accepts it,
 * as `npm run dev` reports it ("live: the new server answers N s after the
 * change"), with the steps side by side (dev's default) and one after another
 * (`--serial`, as dev ran them before), in one run on the same machine. Each
 * mode runs dev on a copy of the contract and adds a new operation `--edits`
 * times, waiting for each to go live.
 *
 * Target (docs/development.md, "Edit → live"): under 10 s on a quiet machine.
 * The load average is printed with the figures: on a shared machine they are
 * evidence, not a gate.
 *
 *   npm run bench:dev [-- --edits 3]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { withOperation } from '../test/helpers/contract-edit.ts';
import { freePort, root, runMain } from './bench/processes.ts';

const { values } = parseArgs({ options: { edits: { type: 'string', default: '3' } } });
const edits = Number(values.edits);

/** Runs dev in one mode and returns each edit's seconds to live. */
async function measure(serial: boolean): Promise<number[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-dev-'));
  const contract = path.join(dir, 'openapi.yaml');
  fs.copyFileSync(path.join(root, 'openapi/openapi.yaml'), contract);
  fs.mkdirSync(path.join(dir, 'console'));
  fs.copyFileSync(path.join(root, 'openapi/console.yaml'), path.join(dir, 'console', 'console.yaml'));
  const args = [
    '--contract',
    contract,
    '--generated',
    path.join(dir, 'api.ts'),
    '--parameters',
    path.join(dir, 'parameters.ts'),
    '--console-contract',
    path.join(dir, 'console', 'console.yaml'),
    '--console-generated',
    path.join(dir, 'console.ts'),
  ];
  const dev = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/dev.ts'), ...args, ...(serial ? ['--serial'] : [])], {
    cwd: root,
    env: { ...process.env, PORT: String(await freePort()), DATA_DIR: path.join(dir, 'data'), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  dev.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
  const next = async (pattern: RegExp, from: number): Promise<RegExpExecArray> => {
    for (const deadline = Date.now() + 180_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
      const m = pattern.exec(output.slice(from));
      if (m) return m;
    }
    throw new Error(`dev did not print ${pattern} within 3 minutes:\n${output}`);
  };
  try {
    await next(/\[dev\] serving on /, 0);
    const seconds: number[] = [];
    for (let i = 0; i < edits; i++) {
      const from = output.length;
      const edited = withOperation(fs.readFileSync(contract, 'utf8'), {
        path: `/api/generate/bench-dev-${i}`,
        operationId: `benchDev${i}`,
        summary: `Bench edit ${i}`,
      });
      fs.writeFileSync(contract, edited);
      const live = await next(/\[dev\] live: the new server answers (\d+\.\d) s after the change(.*)/, from);
      seconds.push(Number(live[1]));
      if (live[2]) console.log(`  edit ${i + 1}: ${live[1]} s${live[2]}`);
    }
    return seconds;
  } finally {
    dev.kill('SIGTERM');
    await new Promise((resolve) => dev.once('exit', resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

runMain(async () => {
  const load = () => os.loadavg()[0]!.toFixed(1);
  for (const serial of [true, false]) {
    const before = load();
    const seconds = await measure(serial);
    console.log(
      `${serial ? 'one after another (--serial)' : 'side by side (default)    '}: ${seconds.map((s) => `${s.toFixed(1)} s`).join(', ')}  (load average ${before} → ${load()}, ${os.cpus().length} cores)`,
    );
  }
  return 0;
});
