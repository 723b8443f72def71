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
  },
});
const contract = path.resolve(values.contract);
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
  // Every output is the same file (npm run generate writes each with the same arguments): generate once, copy the rest.
  const [first, ...rest] = outputs;
  const failed = typesOf(contract, first);
  if (failed) return failed;
  for (const out of rest) fs.copyFileSync(first, out);
  const params = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/generate-parameters.ts'), contract, parametersOut], { cwd: root, encoding: 'utf8' });
  return params.status === 0 ? undefined : withoutStack(`${params.stdout}${params.stderr}`.trim());
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

/** Starts a server on `contractFile` and makes it the live one once ready; false (the old one stays live) when it does not start. */
async function startNext(contractFile: string): Promise<boolean> {
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
  if (exited || stopping) {
    if (!stopping) say(`the new server did not start${live ? '; the last good server keeps running' : ''}`);
    return false;
  }
  const old = live;
  live = { child, port };
  proxy.switchTo(port);
  if (old) void stopChild(old.child);
  return true;
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
  if (batch.contract || !goodContract) goodContract = snapshot();
  say(batch.contract || batch.console ? 'starting a server on the new contract beside the running one' : 'server code changed: starting a new server beside the running one');
  if (await startNext(goodContract)) say(`live: the new server answers ${((performance.now() - since) / 1000).toFixed(1)} s after the change`);
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
    void Promise.all([...children].map(stopChild))
      .then(() => proxy?.close())
      .finally(() => {
        fs.rmSync(snapshots, { recursive: true, force: true });
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
const problem = lint();
contractBroken = problem !== undefined;
if (problem) say(`the contract does not lint (fix it; the server starts once it does):\n${problem}`);
else {
  goodContract = snapshot();
  if (await startNext(goodContract)) say(`serving on ${listenBaseUrl(process.env.HOST || '127.0.0.1', proxy.port)}; watching ${path.relative(root, contract) || contract} and server/`);
}
