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
 * The steps of a contract change run side by side: the linter, the type
 * generator, the parameters script and the next server's start (the server
 * runs the sources and needs none of the generated files); the types are
 * written into place and the proxy switched only once the lint passed, so a
 * contract that fails keeps the last good types and server. A save that
 * changed nothing restarts nothing. `--serial` runs the steps one after
 * another, as dev did before, to measure what running them together buys.
 * Edits arriving together are handled once (a short debounce); Ctrl-C or SIGTERM
 * stops both (package.json runs it with `exec`, so a signal to `npm run dev`
 * reaches this process). A tool's failure is printed without its stack trace.
 *
 *   npm run dev [-- --contract FILE --generated OUT.ts … --parameters OUT.ts --console-contract FILE --console-generated OUT.ts --serial]   (PORT, DATA_DIR … as for npm start)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SERVER_NODE_FLAGS } from '../server/node-flags.ts';
import { listenBaseUrl } from '../server/public-url.ts';
import { startDevProxy, type DevProxy } from './dev-proxy.ts';

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
    serial: { type: 'boolean', default: false },
  },
});
const contract = path.resolve(values.contract);
const outputs = (values.generated ?? [path.join(root, 'generated/api.ts'), path.join(root, 'client/generated/api.ts')]).map((f) => path.resolve(f));
const parametersOut = path.resolve(values.parameters ?? path.join(root, 'client/generated/parameters.ts'));
const debounceMs = Number(values.debounce);
const consoleContract = path.resolve(values['console-contract']!);
const consoleOut = path.resolve(values['console-generated']!);
const serial = values.serial;

const say = (line: string) => console.log(`[dev] ${line}`);

/** The tools running now (stopped with dev). */
const tools = new Set<ChildProcess>();

/** Runs a Node tool of the project; its exit status and what it printed. */
function tool(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    tools.add(child);
    child.once('exit', () => tools.delete(child));
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.once('error', (error) => resolve({ status: null, output: error.message }));
    child.once('close', (status) => resolve({ status, output: output.trim() }));
  });
}

/** Lints a contract (default: the API's); returns the linter's output when it fails. */
async function lint(file = contract): Promise<string | undefined> {
  const run = await tool([bin('redocly'), 'lint', file], { ...process.env, REDOCLY_TELEMETRY: 'off' });
  return run.status === 0 ? undefined : run.output || `redocly exited ${run.status}`;
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
async function typesOf(from: string, out: string): Promise<string | undefined> {
  const run = await tool([bin('openapi-typescript'), from, '--default-non-nullable', 'false', '-o', out]);
  return run.status === 0 ? undefined : withoutStack(run.output);
}

/** Files generated aside, moved into place only once their contract linted. */
const staging = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-dev-generated-'));
let stagedCount = 0;
const staged = (name: string) => path.join(staging, `${++stagedCount}-${path.basename(name)}`);

/**
 * Generates every output from a contract aside (the types once, the parameters
 * beside them); `place()` puts them where they belong. The failure when one fails.
 */
async function generate(from: string): Promise<{ failed?: string; place(): void }> {
  // Every output is the same file (npm run generate writes each with the same arguments): generate once, copy it to each.
  const types = staged(outputs[0]!);
  const params = staged(parametersOut);
  const [failed, run] = await Promise.all([typesOf(from, types), tool(['--import', 'tsx', path.join(root, 'scripts/generate-parameters.ts'), from, params])]);
  const place = () => {
    for (const out of outputs) fs.copyFileSync(types, out);
    fs.copyFileSync(params, parametersOut);
  };
  return { failed: failed ?? (run.status === 0 ? undefined : withoutStack(run.output)), place };
}

/**
 * The servers. Each runs on a snapshot of the contract taken when it linted, so its
 * /openapi.yaml is exactly the contract it enforces (the server reads OPENAPI_PATH
 * at every request: on the edited file itself it served the new contract before a
 * server accepting it ran). A restart starts the next server on a port of its own
 * beside the live one and switches the proxy on HOST:PORT to it once it answers
 * /readyz, then stops the old one: nothing is down, and a server that fails to
 * start leaves the last good one live.
 */
const snapshots = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-dev-contract-'));
let snapshotCount = 0;
function snapshot(): string {
  const file = path.join(snapshots, `${++snapshotCount}-${path.basename(contract)}`);
  fs.copyFileSync(contract, file);
  return file;
}

/** A port free a moment ago, for the next server (dev's own, so nothing else should take it). */
async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

interface Running {
  child: ChildProcess;
  port: number;
}
let live: Running | undefined;
const children = new Set<ChildProcess>();
let proxy!: DevProxy;
let childEnv: NodeJS.ProcessEnv;

async function answersReady(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
  } catch {
    return false;
  }
}

/** Starts a server on `contractFile` beside the live one; resolves once it answers (undefined when it did not start: see `notStarted`). */
async function launch(contractFile: string): Promise<Running | undefined> {
  const port = await freePort();
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, '--import', 'tsx', path.join(root, 'server/main.ts')], {
    cwd: root,
    env: { ...childEnv, PORT: String(port), OPENAPI_PATH: contractFile },
    stdio: 'inherit',
  });
  children.add(child);
  let exited = false;
  child.once('exit', (code, signal) => {
    exited = true;
    children.delete(child);
    if (live?.child !== child) return;
    live = undefined;
    proxy.switchTo(undefined);
    if (!stopping) say(`the server stopped (${signal ?? `exit ${code}`}); waiting for a change to start it again`);
  });
  while (!exited && !stopping && !(await answersReady(port))) await new Promise((resolve) => setTimeout(resolve, 100));
  return exited || stopping ? undefined : { child, port };
}

/** Makes a started server the live one: the proxy switches to it, the old one stops. */
function promote(next: Running): void {
  const old = live;
  live = next;
  proxy.switchTo(next.port);
  if (old) void stopChild(old.child);
}

/** Starts a server on `contractFile` and makes it the live one once ready; false (the old one stays live) when it does not start. */
async function startNext(contractFile: string): Promise<boolean> {
  const next = await launch(contractFile);
  if (next) promote(next);
  else notStarted();
  return next !== undefined;
}

/** Says that a new server did not start (its own output above says why). */
function notStarted(): void {
  if (!stopping) say(`the new server did not start${live ? '; the last good server keeps running' : ''}`);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
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
/** When the first change of the pending batch arrived: the start of "edit → live". */
let changedAt = 0;
let timer: NodeJS.Timeout | undefined;
let busy = Promise.resolve();

/** Set while the contract does not lint: the last good server then keeps running whatever else changes. */
let contractBroken = false;
/** The snapshot of the contract that last linted: what every new server runs on. */
let goodContract: string | undefined;

/** What a batch of changes does: see the header. */
async function apply(batch: Batch, since: number): Promise<void> {
  if (batch.console) {
    // Its types are made aside while it lints and written only if it does: a bad $ref reads as the linter's message.
    const types = staged(consoleOut);
    const [problem, failed] = serial ? [await lint(consoleContract), undefined] : await Promise.all([lint(consoleContract), typesOf(consoleContract, types)]);
    if (problem) {
      say(`the console's contract does not lint; the last good server keeps running:\n${problem}`);
      return;
    }
    const typeFailure = serial ? await typesOf(consoleContract, types) : failed;
    if (typeFailure) {
      say(`regenerating the console's types failed; the last good server keeps running:\n${typeFailure}`);
      return;
    }
    fs.copyFileSync(types, consoleOut);
    say(`regenerated ${path.relative(root, consoleOut)} from ${path.relative(root, consoleContract)}`);
  }
  if (batch.contract && goodContract && !contractBroken && sameFile(contract, goodContract)) {
    // Saved without a change (or changed back): nothing to lint, generate or restart.
    batch = { ...batch, contract: false };
    if (!batch.console) return say('the contract did not change');
  }
  if (batch.contract) {
    // What is linted, generated from and served is one snapshot: an edit meanwhile is the next batch.
    const candidate = snapshot();
    say('linting the contract, generating its types and starting a server on it');
    const took: number[] = [];
    const timed = <T>(i: number, step: Promise<T>): Promise<T> => step.finally(() => (took[i] = (performance.now() - since) / 1000));
    const steps = serial
      ? await serialSteps(candidate)
      : await Promise.all([timed(0, lint(candidate)), timed(1, generate(candidate)), timed(2, launch(candidate))]);
    const [problem, generated, next] = steps;
    contractBroken = problem !== undefined;
    const failure = problem
      ? `the contract does not lint; the last good server keeps running:\n${problem}`
      : generated?.failed
        ? `regenerating the types failed; the last good server keeps running:\n${generated.failed}`
        : undefined;
    if (failure || !generated || !next) {
      if (next) void stopChild(next.child);
      // A server started on a contract that failed may have failed too: the contract's problem is the one to read.
      if (failure) say(failure);
      else notStarted();
      return;
    }
    generated.place();
    goodContract = candidate;
    say(`contract linted; regenerated ${[...outputs, parametersOut].map((o) => path.relative(root, o)).join(', ')}`);
    promote(next);
    // Each step's end, counted from the change, shows which one the edit waited for.
    const ends =
      took.length === 3 ? ` (lint done at ${took[0]!.toFixed(1)} s, types at ${took[1]!.toFixed(1)} s, the server ready at ${took[2]!.toFixed(1)} s)` : '';
    return say(`live: the new server answers ${((performance.now() - since) / 1000).toFixed(1)} s after the change${ends}`);
  }
  if (contractBroken) {
    say('the contract still does not lint; the last good server keeps running until it does');
    return;
  }
  goodContract ??= snapshot();
  say(batch.console ? 'starting a server on the new contract beside the running one' : 'server code changed: starting a new server beside the running one');
  if (await startNext(goodContract)) say(`live: the new server answers ${((performance.now() - since) / 1000).toFixed(1)} s after the change`);
}

/** The steps of a contract change one after another (`--serial`): each runs only if the one before passed. */
async function serialSteps(candidate: string): Promise<[string | undefined, Awaited<ReturnType<typeof generate>> | undefined, Running | undefined]> {
  const problem = await lint(candidate);
  if (problem) return [problem, undefined, undefined];
  const generated = await generate(candidate);
  if (generated.failed) return [undefined, generated, undefined];
  return [undefined, generated, await launch(candidate)];
}

/** Whether two files hold the same bytes. */
function sameFile(a: string, b: string): boolean {
  try {
    return fs.readFileSync(a).equals(fs.readFileSync(b));
  } catch {
    return false;
  }
}

function changed(what: Partial<Batch>): void {
  if (!pending) changedAt = performance.now();
  pending = { contract: (pending?.contract ?? false) || !!what.contract, console: (pending?.console ?? false) || !!what.console };
  clearTimeout(timer);
  timer = setTimeout(() => {
    const batch = pending!;
    const since = changedAt;
    pending = undefined;
    busy = busy.then(() => apply(batch, since)).catch((error: unknown) => say(`failed: ${(error as Error).message}`));
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
    for (const child of tools) child.kill('SIGTERM');
    void Promise.all([...children].map(stopChild))
      .then(() => proxy?.close())
      .finally(() => {
        fs.rmSync(snapshots, { recursive: true, force: true });
        fs.rmSync(staging, { recursive: true, force: true });
        process.exit(0);
      });
  });
}

/** The proxy on HOST:PORT (as npm start would listen) and what every server is started with. */
async function open(): Promise<void> {
  const host = process.env.HOST || '127.0.0.1';
  const port = process.env.PORT ? Number(process.env.PORT) : 8080;
  proxy = await startDevProxy(host, port);
  childEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    // Links (the admin CLI's invites, signed downloads) name the proxy, which stays, not a server's own port.
    PUBLIC_BASE_URL: process.env.PUBLIC_BASE_URL || listenBaseUrl(host, proxy.port),
    // The proxy passes the person's address on; the servers believe it from loopback only.
    TRUST_PROXY: [process.env.TRUST_PROXY, 'loopback'].filter(Boolean).join(','),
  };
  // Two servers overlap during a restart: a fixed metrics port would stop the second.
  delete childEnv.METRICS_PORT;
}

try {
  await open();
} catch (error) {
  say(`cannot listen: ${(error as Error).message}`);
  process.exit(1);
}
// The first server starts while the contract lints; it goes live only if the lint passes.
const first = snapshot();
const [problem, firstServer] = serial ? [await lint(first), undefined] : await Promise.all([lint(first), launch(first)]);
contractBroken = problem !== undefined;
if (problem) {
  if (firstServer) void stopChild(firstServer.child);
  say(`the contract does not lint (fix it; the server starts once it does):\n${problem}`);
} else {
  goodContract = first;
  const running = firstServer ?? (await launch(first));
  if (!running) notStarted();
  else {
    promote(running);
    say(`serving on ${listenBaseUrl(process.env.HOST || '127.0.0.1', proxy.port)}; watching ${path.relative(root, contract) || contract} and server/`);
  }
}
