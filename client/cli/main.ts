/**
 * The `gemforge` API command line. It only wires commands to the client and its
 * helpers (STYLE habit 10). The key comes from GEMFORGE_API_KEY and the base
 * URL from GEMFORGE_BASE_URL (default http://127.0.0.1:8080).
 */
import { parseArgs } from 'node:util';
import { createGemforgeClient } from '../client.ts';
import { COMMANDS, type Ctx } from './commands.ts';
import { printError, type CliIo } from './output.ts';
import { UsageError } from './params.ts';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export const USAGE = `usage: gemforge <command> [options]

  models                                   list models (discovery; not a quote)
  upload FILE [--type MIME] [--filename N] upload reference media; prints the asset ID
  voices [--scope mine|explore] [--page N] [--language L]
  voices add FILE --duration S --rights-confirmed
  image "prompt" [--model M] [--param k=v …] [--ref ASSET …] [--max-gems N] [--out DIR]
  video "prompt" [--model M] [--param k=v …] [--ref ASSET …] [--max-gems N] [--out DIR]
  speech "text" --voice VOICE_ID [--clone] [--model M] [--param k=v …] [--out DIR]
  music "prompt" [--model M] [--param k=v …] [--ref AUDIO_ASSET] [--out DIR]
  text "prompt" [--model M] [--stream] [--system S] [--max-tokens N] [--temperature T] [--json-object]
  extract VIDEO_ASSET_ID [--prompt P] [--max-gems N]
  task ID [--wait] [--out DIR]
  admin …, worker                          server-side administration (see README)

  Spending commands (image, video, speech, music, text, extract) take
  [--idempotency-key K] to replay an earlier request, and [--max-gems N].
  Media commands wait for the task and save outputs to --out (default .);
  --no-wait prints the task and returns; --timeout S bounds the wait (default 900).
  --json prints machine-readable results on stdout.
  Without --model, the first available model of the kind from discovery is used.

  GEMFORGE_API_KEY   the personal API key (gf_…); GEMFORGE_BASE_URL   default ${DEFAULT_BASE_URL}
`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
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

/** Runs one command line; resolves to the exit code (0 ok, 1 API error, 2 usage, 75 wait timed out, 130 interrupted). */
export async function runCli(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    io.stderr.write(`gemforge: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (!command || values.help || command === 'help') {
    io.stdout.write(USAGE);
    return command || values.help ? 0 : 2;
  }
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run) {
    io.stderr.write(`gemforge: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  const apiKey = io.env.GEMFORGE_API_KEY ?? '';
  const baseUrl = io.env.GEMFORGE_BASE_URL || DEFAULT_BASE_URL;
  if (!apiKey) {
    io.stderr.write('gemforge: set GEMFORGE_API_KEY to a personal API key (make one with `gemforge admin key create`).\n');
    return 2;
  }
  const schedule = io.env.GEMFORGE_POLL_SCHEDULE_MS?.split(',').map(Number).filter((n) => Number.isFinite(n) && n >= 0);
  const ctx: Ctx = {
    gf: createGemforgeClient({ baseUrl, apiKey }),
    io,
    values,
    args,
    json: values.json === true,
    pollScheduleMs: schedule?.length ? schedule : undefined,
  };
  try {
    return await run(ctx);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`gemforge ${command}: ${error.message}\n`);
      return 2;
    }
    return printError(io, error, ctx.json);
  }
}
