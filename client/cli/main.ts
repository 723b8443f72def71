/**
 * The `gemforge` API command line. It only wires commands to the client and its
 * helpers, so the CLI holds no API logic of its own. The key comes from GEMFORGE_API_KEY and the base
 * URL from GEMFORGE_BASE_URL (default http://127.0.0.1:8080). The package's
 * bin (cli/bin.ts) and the repository's scripts/gemforge.mjs both call runCli;
 * only the latter adds the server's admin and worker commands.
 */
import { parseArgs } from 'node:util';
import { createGemforgeClient } from '../client.ts';
import { ConnectionError } from '../errors.ts';
import { newIdempotencyKey } from '../idempotency.ts';
import { COMMANDS, SPENDING, type Ctx } from './commands.ts';
import { commandHelp, DEFAULT_BASE_URL, HELP, packageVersion, suggest, usage } from './help.ts';
import { printError, type CliIo } from './output.ts';
import { UsageError } from './params.ts';

export { DEFAULT_BASE_URL };

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  model: { type: 'string', short: 'm' },
  param: { type: 'string', short: 'p', multiple: true },
  ref: { type: 'string', multiple: true },
  'max-gems': { type: 'string' },
  out: { type: 'string', short: 'o' },
  'idempotency-key': { type: 'string' },
  'no-wait': { type: 'boolean' },
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
  stream: { type: 'boolean' },
  system: { type: 'string' },
  'max-tokens': { type: 'string' },
  temperature: { type: 'string' },
  'json-object': { type: 'boolean' },
  prompt: { type: 'string' },
  voice: { type: 'string' },
  clone: { type: 'boolean' },
  scope: { type: 'string' },
  page: { type: 'string' },
  language: { type: 'string' },
  duration: { type: 'string' },
  'rights-confirmed': { type: 'boolean' },
  type: { type: 'string' },
  filename: { type: 'string' },
} as const;

export type CliValues = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
}

const defaultIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr, env: process.env });

/** What a mistake in the flags prints: the parser's message, a close flag, and the command's help. */
function badFlags(argv: string[], error: Error & { code?: string }): string {
  const command = argv.find((a) => !a.startsWith('-'));
  const unknown = error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(--?[^']+)'/.exec(error.message)?.[1] : undefined;
  const close = unknown ? suggest(unknown.replace(/^-+/, ''), Object.keys(OPTIONS)).map((o) => `--${o}`) : [];
  const hint = close.length ? ` (did you mean ${close.join(' or ')}?)` : '';
  const message = unknown ? `unknown option ${unknown}${hint}` : error.message;
  return `gemforge: ${message}\n\n${command && Object.hasOwn(HELP, command) ? commandHelp(command) : usage()}`;
}

/** `gemforge help`, `gemforge help <command>`, `gemforge <command> --help`, `gemforge --version`; undefined when none applies. */
function helpOrVersion(io: CliIo, command: string | undefined, args: string[], values: CliValues): number | undefined {
  if (values.version) return (io.stdout.write(`${packageVersion()}\n`), 0);
  const topic = command === 'help' ? args[0] : values.help ? command : undefined;
  if (topic && Object.hasOwn(HELP, topic)) return (io.stdout.write(commandHelp(topic)), 0);
  if (command === 'help' || values.help) return (io.stdout.write(usage()), topic ? 2 : 0);
  if (!command) return (io.stderr.write(usage()), 2);
  return undefined;
}

/** An unknown command: the closest ones, then the overview. */
function unknownCommand(io: CliIo, command: string): number {
  if (command === 'admin' || command === 'worker') {
    io.stderr.write(
      `gemforge: "${command}" runs with the server (it opens the server's database): run "npx gemforge ${command} …" in the gemforge server's folder.\n`,
    );
    return 2;
  }
  const close = suggest(command, [...Object.keys(COMMANDS), 'help']);
  io.stderr.write(`gemforge: unknown command "${command}"${close.length ? ` (did you mean ${close.map((c) => `"${c}"`).join(' or ')}?)` : ''}\n\n${usage()}`);
  return 2;
}

/** Runs one command line; resolves to the exit code (0 ok, 1 API error, 2 usage, 75 wait timed out, 130 interrupted). */
export async function runCli(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    io.stderr.write(badFlags(argv, error as Error));
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  const early = helpOrVersion(io, command, args, values);
  if (early !== undefined) return early;
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run) return unknownCommand(io, command);
  const apiKey = io.env.GEMFORGE_API_KEY ?? '';
  const baseUrl = io.env.GEMFORGE_BASE_URL || DEFAULT_BASE_URL;
  if (!apiKey) {
    io.stderr.write('gemforge: set GEMFORGE_API_KEY to a personal API key (make one with `gemforge admin key create`).\n');
    return 2;
  }
  const schedule = io.env.GEMFORGE_POLL_SCHEDULE_MS?.split(',')
    .map(Number)
    .filter((n) => Number.isFinite(n) && n >= 0);
  const ctx: Ctx = {
    gf: createGemforgeClient({ baseUrl, apiKey }),
    io,
    values,
    args,
    json: values.json === true,
    pollScheduleMs: schedule?.length ? schedule : undefined,
    // One identity per spending command line, made before anything is sent, so any failure can name it.
    idempotencyKey: SPENDING.has(command) ? (values['idempotency-key'] ?? newIdempotencyKey()) : undefined,
  };
  try {
    return await run(ctx);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`gemforge ${command}: ${error.message}\n`);
      return 2;
    }
    if (error instanceof ConnectionError) error.idempotencyKey ??= ctx.idempotencyKey;
    return printError(io, error, ctx.json, baseUrl);
  }
}
