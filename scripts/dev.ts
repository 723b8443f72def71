/**
 * `npm run dev`: the designer's watch mode. Runs the server
 * and watches the contract and the server's code:
 * - the contract changed: lint it (redocly); when it passes, regenerate the
 *   types (generated/ and client/generated/, as `npm run generate` does) and
 *   restart the server on it; when it fails, print the linter's message and keep
 *   the last good server running;
 * - the console's contract (openapi/console.yaml) changed: regenerate its types
 *   (generated/console.ts) and restart the server on it;
 * - server code changed (TypeScript, YAML, the console page's HTML and CSS):
 *   restart the server.
 * Edits arriving together are handled once (a short debounce); Ctrl-C or SIGTERM
 * stops both (package.json runs it with `exec`, so a signal to `npm run dev`
 * reaches this process). A tool's failure is printed without its stack trace.
 *
 *   npm run dev [-- --contract FILE --generated OUT.ts … --parameters OUT.ts --console-contract FILE --console-generated OUT.ts]   (PORT, DATA_DIR … as for npm start)
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SERVER_NODE_FLAGS } from '../server/node-flags.ts';

const root = path.resolve(import.meta.dirname, '..');
/** A tool's script in node_modules/.bin, run with this Node (not whichever `node` is first on PATH). */
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);

const { values } = parseArgs({
  options: {
    contract: { type: 'string', default: path.join(root, 'openapi/openapi.yaml') },
    generated: { type: 'string', multiple: true },
    parameters: { type: 'string' },
    'console-contract': { type: 'string', default: path.join(root, 'openapi/console.yaml') },
    'console-generated': { type: 'string', default: path.join(root, 'generated/console.ts') },
    debounce: { type: 'string', default: '150' },
  },
});
const contract = path.resolve(values.contract!);
const outputs = (values.generated ?? [path.join(root, 'generated/api.ts'), path.join(root, 'client/generated/api.ts')]).map((f) => path.resolve(f));
const parametersOut = path.resolve(values.parameters ?? path.join(root, 'client/generated/parameters.ts'));
const debounceMs = Number(values.debounce);
const consoleContract = path.resolve(values['console-contract']!);
const consoleOut = path.resolve(values['console-generated']!);

const say = (line: string) => console.log(`[dev] ${line}`);

/** Lints a contract (default: the API's); returns the linter's output when it fails. */
function lint(file = contract): string | undefined {
  const run = spawnSync(process.execPath, [bin('redocly'), 'lint', file], { cwd: root, encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off' } });
  return run.status === 0 ? undefined : `${run.stdout}${run.stderr}`.trim() || `redocly exited ${run.status}`;
}

/**
 * A tool's failure as a designer wants to read it: its message without the
 * JavaScript stack trace (openapi-typescript throws on a bad `$ref`, and Node
 * prints the throwing source line, `at …` frames and its version).
 */
function withoutStack(output: string): string {
  const lines = output.split('\n');
  const stackStart = lines.findIndex((l) => /^file:\/\/|^\s+at\s/.test(l));
  if (stackStart < 0) return output;
  const kept = lines.slice(0, stackStart);
  const error = lines.slice(stackStart).find((l) => /^\w*Error: /.test(l));
  if (error && !kept.some((l) => l.includes(error.replace(/^\w*Error: /, '')))) kept.push(error);
  return kept.join('\n').trim();
}

/** Types from a contract (openapi-typescript, as `npm run generate` runs it); the failure when it fails. */
function typesOf(from: string, out: string): string | undefined {
  const run = spawnSync(process.execPath, [bin('openapi-typescript'), from, '--default-non-nullable', 'false', '-o', out], { cwd: root, encoding: 'utf8' });
  return run.status === 0 ? undefined : withoutStack(`${run.stdout}${run.stderr}`.trim());
}

/** Regenerates every output from the contract; returns the failure when one fails. */
function generate(): string | undefined {
  for (const out of outputs) {
    const failed = typesOf(contract, out);
    if (failed) return failed;
  }
  const params = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/generate-parameters.ts'), contract, parametersOut], { cwd: root, encoding: 'utf8' });
  return params.status === 0 ? undefined : withoutStack(`${params.stdout}${params.stderr}`.trim());
}

let server: ChildProcess | undefined;

function startServer(): void {
  server = spawn(process.execPath, [...SERVER_NODE_FLAGS, '--import', 'tsx', path.join(root, 'server/main.ts')], {
    cwd: root,
    env: { ...process.env, OPENAPI_PATH: contract },
    stdio: 'inherit',
  });
  const mine = server;
  mine.once('exit', (code, signal) => {
    if (server === mine && !stopping) say(`the server stopped (${signal ?? `exit ${code}`}); waiting for a change to start it again`);
    if (server === mine) server = undefined;
  });
}

async function stopServer(): Promise<void> {
  const child = server;
  if (!child || child.exitCode !== null) return;
  server = undefined;
  await new Promise<void>((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

let stopping = false;
type Batch = { contract: boolean; console: boolean };
let pending: Batch | undefined;
let timer: NodeJS.Timeout | undefined;
let busy = Promise.resolve();

/** What a batch of changes does: see the header. */
/** Set while the contract does not lint: the last good server then keeps running whatever else changes. */
let contractBroken = false;

async function apply(batch: Batch): Promise<void> {
  if (batch.console) {
    // Linted first, like the API's contract: a bad $ref reads as the linter's message, not a generator's crash.
    const problem = lint(consoleContract);
    if (problem) {
      say(`the console's contract does not lint; the last good server keeps running:\n${problem}`);
      return;
    }
    const failed = typesOf(consoleContract, consoleOut);
    if (failed) {
      say(`regenerating the console's types failed; the last good server keeps running:\n${failed}`);
      return;
    }
    say(`regenerated ${path.relative(root, consoleOut)} from ${path.relative(root, consoleContract)}`);
  }
  if (batch.contract) {
    const problem = lint();
    contractBroken = problem !== undefined;
    if (problem) {
      say(`the contract does not lint; the last good server keeps running:\n${problem}`);
      return;
    }
    const failed = generate();
    if (failed) {
      say(`regenerating the types failed; the last good server keeps running:\n${failed}`);
      return;
    }
    say(`contract linted; regenerated ${[...outputs, parametersOut].map((o) => path.relative(root, o)).join(', ')}`);
  }
  if (contractBroken) {
    say('the contract still does not lint; the last good server keeps running until it does');
    return;
  }
  await stopServer();
  say(batch.contract || batch.console ? 'restarting the server on the new contract' : 'server code changed: restarting the server');
  startServer();
}

function changed(what: Partial<Batch>): void {
  pending = { contract: (pending?.contract ?? false) || !!what.contract, console: (pending?.console ?? false) || !!what.console };
  clearTimeout(timer);
  timer = setTimeout(() => {
    const batch = pending!;
    pending = undefined;
    busy = busy.then(() => apply(batch)).catch((error: unknown) => say(`failed: ${(error as Error).message}`));
  }, debounceMs);
}

// Watch directories, not files: editors save by writing a new file and renaming it over the old.
fs.watch(path.dirname(contract), (_event, name) => {
  if (name && path.join(path.dirname(contract), name.toString()) === contract) changed({ contract: true });
});
fs.watch(path.dirname(consoleContract), (_event, name) => {
  if (name && path.join(path.dirname(consoleContract), name.toString()) === consoleContract) changed({ console: true });
});
fs.watch(path.join(root, 'server'), { recursive: true }, (_event, name) => {
  if (name && /\.(ts|ya?ml|html|css)$/.test(name.toString())) changed({});
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopping = true;
    say('stopping');
    void stopServer().then(() => process.exit(0));
  });
}

const problem = lint();
contractBroken = problem !== undefined;
if (problem) say(`the contract does not lint (fix it; the server starts once it does):\n${problem}`);
else {
  startServer();
  say(`serving; watching ${path.relative(root, contract) || contract} and server/`);
}
