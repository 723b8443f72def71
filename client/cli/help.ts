/**
 * What `gemforge help`, `gemforge <command> --help` and `gemforge --version`
 * print. Every command is described once here: the overview lists the first
 * usage line and summary of each, the command's own help adds its options and
 * an example.
 */
import fs from 'node:fs';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export interface CommandHelp {
  /** Usage lines without the leading `gemforge `. */
  usage: string[];
  summary: string;
  /** `[flag, what it does]`. */
  options: Array<[string, string]>;
  example: string;
}

const SPEND: Array<[string, string]> = [
  ['--max-gems N', 'refuse (409 PRICE_CHANGED) when the quote exceeds N Gems'],
  ['--idempotency-key K', 'the identity of an earlier request, to replay it instead of making new work'],
];
const MEDIA: Array<[string, string]> = [
  ['--model M, -m M', 'the model ID (default: the first available one of the kind in discovery)'],
  ['--param k=v, -p k=v', 'a model parameter, repeatable; k:=JSON passes any JSON value'],
  ...SPEND,
  ['--out DIR, -o DIR', 'where outputs are saved (default .)'],
  ['--no-wait', 'print the task and return instead of waiting'],
  ['--timeout S', 'bound the wait (default 900 s); a time-out prints the resume command'],
];
const JSON_FLAG: [string, string] = ['--json', 'print a machine-readable result on stdout'];

export const HELP: Record<string, CommandHelp> = {
  models: {
    usage: ['models'],
    summary: 'list models (discovery; not a quote)',
    options: [JSON_FLAG],
    example: 'gemforge models',
  },
  upload: {
    usage: ['upload FILE [--type MIME] [--filename N]'],
    summary: 'upload reference media; prints the asset ID',
    options: [['--type MIME', 'the Content-Type (default: from the bytes and the extension)'], ['--filename N', 'the name sent as X-Filename'], JSON_FLAG],
    example: 'gemforge upload fox.png',
  },
  voices: {
    usage: ['voices [--scope mine|explore] [--page N] [--language L] [--model M]', 'voices add FILE --duration S --rights-confirmed'],
    summary: 'list voices, or add a private reference voice',
    options: [
      ['--scope mine|explore', 'your voices (default) or the shared ones'],
      ['--page N', 'the page of 50'],
      ['--language L', 'only voices of this language'],
      ['--model M', 'only voices this speech model can speak with (a remote model speaks only its mapped voices)'],
      ['--duration S', 'add: the recording length in seconds, 15–300'],
      ['--rights-confirmed', "add: the speaker's permission is confirmed"],
      JSON_FLAG,
    ],
    example: 'gemforge voices --scope explore --model gemforge-speech-1',
  },
  image: {
    usage: ['image "prompt" [--model M] [--param k=v …] [--ref ASSET …] [--max-gems N] [--out DIR]'],
    summary: 'generate images, wait and save them',
    options: [...MEDIA, ['--ref ASSET', 'a reference image asset ID, repeatable'], JSON_FLAG],
    example: 'gemforge image "a lighthouse at dusk" --param ratio=16:9 --out out',
  },
  video: {
    usage: ['video "prompt" [--model M] [--param k=v …] [--ref ASSET …] [--max-gems N] [--out DIR]'],
    summary: 'generate a video, wait and save it',
    options: [...MEDIA, ['--ref ASSET', 'a reference asset ID, repeatable'], JSON_FLAG],
    example: 'gemforge video "waves at night" --param mode=text-to-video --param duration=4 --out out',
  },
  speech: {
    usage: ['speech "text" --voice VOICE_ID [--clone] [--model M] [--param k=v …] [--out DIR]'],
    summary: 'speak a text with a voice, wait and save the audio',
    options: [
      ['--voice VOICE_ID', 'the voice (list them with gemforge voices)'],
      ['--clone', 'speak with your own reference voice (voice_clone)'],
      ...MEDIA,
      JSON_FLAG,
    ],
    example: 'gemforge speech "Hello there" --voice VOICE_ID --out out',
  },
  music: {
    usage: ['music "prompt" [--model M] [--param k=v …] [--ref AUDIO_ASSET] [--out DIR]'],
    summary: 'generate music, wait and save it',
    options: [...MEDIA, ['--ref AUDIO_ASSET', 'a reference audio asset ID'], JSON_FLAG],
    example: 'gemforge music "calm piano" --out out',
  },
  text: {
    usage: ['text "prompt" [--model M] [--stream] [--system S] [--max-tokens N] [--temperature T] [--json-object]'],
    summary: 'a chat completion (streamed with --stream)',
    options: [
      ['--model M, -m M', 'the text model (default: the first available one)'],
      ['--stream', 'print the answer as it arrives'],
      ['--system S', 'a system message'],
      ['--max-tokens N', 'the most completion tokens'],
      ['--temperature T', 'sampling temperature'],
      ['--json-object', 'ask for a JSON object answer'],
      ...SPEND,
      JSON_FLAG,
    ],
    example: 'gemforge text "Name three colours" --stream',
  },
  extract: {
    usage: ['extract VIDEO_ASSET_ID [--prompt P] [--max-gems N]'],
    summary: 'analyse an uploaded video',
    options: [['--prompt P', 'what to look for'], ...SPEND, JSON_FLAG],
    example: 'gemforge extract asset_… --prompt "When does the dog appear?"',
  },
  task: {
    usage: ['task ID [--wait] [--out DIR]'],
    summary: 'show a task; --wait waits for it and saves its outputs',
    options: [
      ['--wait', 'wait until the task ends, then save its outputs'],
      ['--out DIR, -o DIR', 'where outputs are saved'],
      ['--timeout S', 'bound the wait (default 900 s)'],
      JSON_FLAG,
    ],
    example: 'gemforge task task_… --wait --out out',
  },
};

const column = (rows: Array<[string, string]>, indent = '  ') => {
  const width = Math.max(...rows.map(([a]) => a.length)) + 2;
  return rows.map(([a, b]) => `${indent}${a.padEnd(width)}${b}`).join('\n');
};

/** The overview: every command with its summary, then what all commands share. */
export function usage(): string {
  const rows = Object.values(HELP).map((h): [string, string] => [h.usage[0].split(' ')[0], h.summary]);
  return `usage: gemforge <command> [options]

${column([...rows, ['help [command]', 'this overview, or one command with its options and an example']])}

  Run "gemforge <command> --help" for a command's options and an example.
  Spending commands (image, video, speech, music, text, extract) take
  [--idempotency-key K] to replay an earlier request, and [--max-gems N].
  Media commands wait for the task and save outputs to --out (default .).
  --json prints machine-readable results on stdout; --version prints the version.
  The admin commands (accounts, keys, ledger) run with the server, in its folder.

  GEMFORGE_API_KEY    the personal API key (gf_…)
  GEMFORGE_BASE_URL   the server (default ${DEFAULT_BASE_URL})
`;
}

/** One command's usage, options and example. */
export function commandHelp(name: string): string {
  const h = HELP[name];
  return `${h.usage.map((u, i) => `${i ? '       ' : 'usage: '}gemforge ${u}`).join('\n')}

${h.summary}

options:
${column(h.options)}

example:
  ${h.example}
`;
}

/** Edits between two words (insert, delete, replace, swap two neighbours), for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The known names closest to `word`: those it begins, or within one edit (two for words over four letters). */
export function suggest(word: string, names: string[]): string[] {
  const w = word.toLowerCase();
  const scored = names.map((n) => ({ n, d: w.length >= 2 && n.startsWith(w) ? 0 : distance(w, n) }));
  const best = Math.min(...scored.map((s) => s.d));
  return best <= (w.length > 4 ? 2 : 1) ? scored.filter((s) => s.d === best).map((s) => s.n) : [];
}

/** This package's version, from the nearest package.json of @gemforge/client above this file (source or dist). */
export function packageVersion(): string {
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    const file = new URL('package.json', dir);
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@gemforge/client' && pkg.version) return pkg.version;
    }
    if (dir.pathname === '/' || new URL('..', dir).href === dir.href) return 'unknown';
  }
}
