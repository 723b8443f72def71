/**
 * Portkey's TypeScript gateway (`@portkey-ai/gateway`), the gateway bench's optional
 * peer: installed on demand into a cache folder outside the project and outside git
 * (never a dependency of gemforge, so neither `npm ci` nor CI installs it), with the
 * hono versions of Portkey's own lock file pinned; started the way its package
 * documents (`node build/start-server.js`, what its `npx` bin runs); and checked to
 * forward a JSON and a streamed completion before anything of it is measured.
 * docs/performance.md ("Text gateway") says why each pin is there.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startNodeServer, type Started } from './processes.ts';

export const PORTKEY_VERSION = '1.15.2';

/**
 * The versions Portkey's package-lock.json holds at its 1.15.2 tag. Its package.json asks
 * only for `hono ^4.9.7` and `@hono/node-server ^1.3.3` (and `@hono/node-ws ^1.2.0`), and
 * the newest versions npm resolves from those ranges do not stream through it; `overrides`
 * in the cache folder's own package.json hold them at the lock file's.
 */
export const PORTKEY_PINS: Readonly<Record<string, string>> = { hono: '4.9.7', '@hono/node-server': '1.13.5', '@hono/node-ws': '1.2.0' };

/** Where the peer is installed: the user's cache, one folder per version, shared by every checkout. */
export const portkeyDir = (): string => path.join(os.homedir(), '.cache', 'gemforge-bench', `portkey-${PORTKEY_VERSION}`);

/** The cache folder's package.json: the gateway at its version, its hono packages held by `overrides`. */
export function cachePackageJson(): string {
  const manifest = {
    name: 'gemforge-bench-portkey',
    private: true,
    description: "Portkey's gateway for gemforge's `npm run bench:gateway` (scripts/bench/portkey.ts writes this file).",
    dependencies: { '@portkey-ai/gateway': PORTKEY_VERSION },
    overrides: PORTKEY_PINS,
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

const versionIn = (dir: string, name: string): string | undefined => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
};

/** The installed packages that are not at the version asked for, as `name version (wanted version)`. */
export function offPins(dir: string): string[] {
  const wanted = { '@portkey-ai/gateway': PORTKEY_VERSION, ...PORTKEY_PINS };
  return Object.entries(wanted)
    .filter(([name, version]) => versionIn(dir, name) !== version)
    .map(([name, version]) => `${name} ${versionIn(dir, name) ?? 'missing'} (wanted ${version})`);
}

/** Runs a command in `cwd`, its output gathered; ends it after `timeoutMs`. */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    // A timer of our own, cleared when the command ends: spawn's `timeout` option outlives a command that never started.
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    const done = (result: { code: number | null; output: string }) => {
      clearTimeout(timer);
      resolve(result);
    };
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', (error) => done({ code: null, output: `${output}${error.message}` }));
    child.on('close', (code) => done({ code, output }));
  });
}

/**
 * Installs the peer into `dir` unless a finished install of the same package.json is there
 * already; returns the script to start, or why it could not be had (offline, the registry
 * refusing, a version off its pin).
 */
export async function installPortkey(dir = portkeyDir()): Promise<{ entry: string } | { reason: string }> {
  const entry = path.join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  const manifest = cachePackageJson();
  // Written last by a finished install: a folder an interrupted install left is installed again.
  const stamp = path.join(dir, '.installed');
  const read = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined);
  if (read(stamp) === manifest && fs.existsSync(entry) && offPins(dir).length === 0) return { entry };
  fs.mkdirSync(dir, { recursive: true });
  fs.rmSync(stamp, { force: true });
  fs.writeFileSync(path.join(dir, 'package.json'), manifest);
  // `npm run` hands its own npm_* settings down (the project's prefix among them): without them
  // the install sees only the cache folder and never touches the project's node_modules.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  // --ignore-scripts: the gateway's only install script is `patch-package` over patches it does
  // not publish, and nothing it needs builds natively.
  const { code, output } = await run('npm', ['install', '--prefix', dir, '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], dir, env, 300_000);
  if (code !== 0) {
    // npm's first lines say what failed (the error code, the address); its last ones point at its log.
    const said = output
      .split('\n')
      .map((line) => line.replace(/^npm (error|ERR!)\s*/, '').trim())
      .filter(Boolean)
      .slice(0, 4);
    return { reason: `npm install in ${dir} ${code === null ? 'did not finish' : `exited with ${code}`}: ${said.join(' | ')}` };
  }
  const off = offPins(dir);
  if (off.length) return { reason: `installed off its pins: ${off.join(', ')}` };
  if (!fs.existsSync(entry)) return { reason: `the package has no ${path.relative(dir, entry)}` };
  fs.writeFileSync(stamp, manifest);
  return { entry };
}

/** Portkey's gateway on the servers' core, headless (no console UI) and in production mode (its logger at errors only). */
export function startPortkey(entry: string, logFile: string): Promise<Started> {
  return startNodeServer({
    args: (port) => [entry, `--port=${port}`, '--headless'],
    cwd: path.resolve(path.dirname(entry), '../../../..'),
    env: () => ({ NODE_ENV: 'production' }),
    logFile,
    ready: { path: '/', status: 200 },
  });
}

/**
 * What routes a request through Portkey to an OpenAI-compatible server at `upstream`
 * (its base URL, `/v1` included): the `openai` provider with a custom host, which
 * Portkey allows on loopback by default. The key is forwarded as the upstream's bearer.
 */
export const portkeyHeaders = (upstream: string): Record<string, string> => ({
  'x-portkey-provider': 'openai',
  'x-portkey-custom-host': upstream,
  authorization: 'Bearer bench-upstream-key',
});

/** Why a non-streamed answer is not a forwarded chat completion, or undefined when it is. */
export function judgeJson(status: number, body: string): string | undefined {
  if (status !== 200) return `JSON answered ${status}: ${body.slice(0, 200)}`;
  try {
    const content = (JSON.parse(body) as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]?.message?.content;
    return typeof content === 'string' && content.length > 0 ? undefined : `JSON answer without a message: ${body.slice(0, 200)}`;
  } catch {
    return `JSON answer is not JSON: ${body.slice(0, 200)}`;
  }
}

/**
 * Why a streamed answer is not a forwarded stream of chat completion chunks (an event
 * stream, at least one delta with content, ending with `[DONE]`), or undefined when it is.
 */
export function judgeStream(status: number, contentType: string, body: string): string | undefined {
  if (status !== 200) return `stream answered ${status}: ${body.slice(0, 200)}`;
  if (!contentType.startsWith('text/event-stream')) return `stream answered ${contentType || 'no content type'}: ${body.slice(0, 200)}`;
  const data = body
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim());
  if (data.at(-1) !== '[DONE]') return `stream did not end with [DONE]: ${JSON.stringify(body.slice(-200))}`;
  let text = '';
  for (const frame of data.slice(0, -1)) {
    try {
      const content = (JSON.parse(frame) as { choices?: Array<{ delta?: { content?: unknown } }> }).choices?.[0]?.delta?.content;
      if (typeof content === 'string') text += content;
    } catch {
      return `stream frame is not JSON: ${frame.slice(0, 200)}`;
    }
  }
  return text.length > 0 ? undefined : `stream carried no content: ${JSON.stringify(body.slice(0, 200))}`;
}

/** One JSON and one streamed completion through the gateway at `url`: why they were not forwarded, or undefined when both were. */
export async function checkForwarding(url: string, headers: Record<string, string>, body: Record<string, unknown>): Promise<string | undefined> {
  const send = (stream: boolean) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ ...body, stream }),
      signal: AbortSignal.timeout(10_000),
    });
  try {
    const json = await send(false);
    const jsonProblem = judgeJson(json.status, await json.text());
    if (jsonProblem) return jsonProblem;
    const stream = await send(true);
    return judgeStream(stream.status, stream.headers.get('content-type') ?? '', await stream.text());
  } catch (error) {
    return `no answer: ${(error as Error).message}`;
  }
}
