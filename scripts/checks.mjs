/**
 * Runs npm scripts side by side (`node scripts/checks.mjs lint:contract typecheck lint`)
 * and fails when any of them fails. The checks are independent and mostly
 * single-threaded (Redocly and Spectral, tsc, eslint), so on two cores they take
 * about as long as the slowest instead of the sum (docs/development.md, "Lint and
 * format"). Each one's output is printed whole when it ends, in the order given,
 * so the lines of two checks never interleave.
 *
 * After `--`, a command run beside them with its output shown as it comes
 * (`npm run test:fast` runs the tests so): nothing the tests read is written by
 * the checks, and the tests wait on timers, threads and child processes often
 * enough that the checks fill the cores meanwhile instead of running first. The
 * checks' outputs are then printed once it has ended, so no check's lines land
 * inside its output.
 */
import { spawn } from 'node:child_process';

const split = process.argv.indexOf('--');
const names = process.argv.slice(2, split === -1 ? undefined : split);
const command = split === -1 ? [] : process.argv.slice(split + 1);
if (names.length === 0 || (split !== -1 && command.length === 0)) {
  console.error('usage: node scripts/checks.mjs <npm script>... [-- <command>...]');
  process.exit(2);
}

/** Runs `npm run -s <name>`: its exit code, everything it wrote and when it ended. */
function run(name) {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '-s', name], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    child.on('error', (error) => resolve({ code: 1, output: Buffer.from(`${error.message}\n`), ended: Date.now() }));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output: Buffer.concat(output), ended: Date.now() }));
  });
}

/** Runs `command` with this process's output: its exit code. */
function runLive([file, ...args]) {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', (error) => {
      process.stderr.write(`${file}: ${error.message}\n`);
      resolve(1);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const started = Date.now();
const running = names.map((name) => ({ name, done: run(name) }));
let failed = 0;
if (command.length > 0) {
  const code = await runLive(command);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(`> ${command.slice(0, 3).join(' ')} …: ${code === 0 ? 'passed' : `failed (exit ${code})`} (done at ${seconds} s)\n`);
  if (code !== 0) failed++;
}
for (const check of running) {
  const { code, output, ended } = await check.done;
  const seconds = ((ended - started) / 1000).toFixed(1);
  process.stdout.write(`> ${check.name}: ${code === 0 ? 'passed' : `failed (exit ${code})`} (done at ${seconds} s)\n`);
  if (output.length > 0) process.stdout.write(output);
  if (code !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
