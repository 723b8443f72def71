/**
 * `gemforge admin …`: the reference server's stand-in for the signed-in account
 * settings page. Works on the same DATA_DIR / DATABASE_URL as the server (also
 * while it runs) and prints JSON on stdout; bad arguments exit 2 with a message.
 */
import { rotateSigningKey } from '../storage/signing-keys.ts';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { suggest } from '../../client/cli/help.ts';
import { loadConfig } from '../config.ts';
import { isSqlite, openDb, sqliteFile, type Db } from '../storage/db.ts';
import { copySqliteTo } from '../storage/maintenance.ts';
import { systemClock } from '../domain/clock.ts';
import * as accounts from '../domain/accounts.ts';
import * as ledger from '../domain/ledger.ts';
import { verifyLedger } from '../domain/ledger-verify.ts';
import { operatorSettle, verifyTasks } from '../domain/tasks.ts';
import * as idem from '../domain/idempotency.ts';
import { describePolicies } from '../domain/policy/settings.ts';
import { invalidInput } from '../domain/errors.ts';
import { cliFailureOf } from '../http/error-map.ts';
import * as moderation from '../domain/policy/moderation.ts';
import * as consoleLogins from '../domain/console.ts';
import { accountOverview } from '../domain/account-view.ts';
import { recordedServerUrl } from '../public-url.ts';
import { limitsOf } from '../domain/admission.ts';
import { describeProviders } from './providers.ts';

export class UsageError extends Error {}

/** Each command's usage, as `gemforge admin --help` and `gemforge admin <command> --help` print it. */
const HELP: Array<[command: string, usage: string]> = [
  ['account create', `account create --name N [--gems G] [--llm-allowance A] [--paid-consent]`],
  [
    'account update',
    `account update ID [--gems G] [--llm-allowance A] [--paid-consent|--no-paid-consent] [--state active|blocked|unavailable]
                    [--content-preference standard|strict] [--network-allow CIDR,…] [--network-deny CIDR,…]
                    [--blocked-regions R,…] [--unknown-region allow|block]
                    [--local-concurrency N|default] [--remote-concurrency N|default] [--queued-tasks N|default]
                                            a list replaces the account's list; '' clears it;
                                            fair share: jobs of the account running at once per lane, and its
                                            queued media tasks (0: no cap; default: the server's setting again)`,
  ],
  ['account show', `account show ID`],
  ['key create', `key create --account ID --name N --scopes read,generate [--cap C] [--expires ISO-8601]`],
  ['key revoke', `key revoke KEY_ID`],
  ['key list', `key list --account ID`],
  [
    'console invite',
    `console invite --account ID --email E [--base-url URL]
                                            a one-time link to the account console (/console), valid ${consoleLogins.INVITE_HOURS} h,
                                            where the holder sets a password; printed once`,
  ],
  ['console login', `console login --account ID --email E --password-stdin   a console login with a password read from stdin`],
  ['console list', `console list [--account ID]               console logins: email, password set, invite pending, live sessions`],
  ['console signout', `console signout --email E                 end every console session of that login`],
  ['ledger verify', `ledger verify`],
  [
    'providers',
    `providers [--metrics URL]...                the upstreams of each catalog model (deployments: provider, priority,
                                            weight, number of keys, shared: open until when, from the database); with
                                            --metrics (a process's /metrics, read with METRICS_TOKEN), each
                                            deployment's breaker state, calls, errors, latency`,
  ],
  ['task settle', `task settle TASK_ID --failed|--succeeded   settle a task held after an interruption`],
  ['identity list', `identity list [--account ID]              identities still pending or uncertain (REQUEST_UNCERTAIN)`],
  [
    'identity release',
    `identity release KEY_ID IDEMPOTENCY_KEY [--pending]
                                            the work certainly did not happen: release its reservation;
                                            replays then answer REQUEST_FAILED`,
  ],
  ['moderation list', `moderation list [--account ID] [--all]    moderation refusals not cleared (--all: cleared ones too), newest first`],
  ['moderation clear', `moderation clear --account ID             clear an account's refusals and lift the block they set`],
  [
    'backup',
    `backup PATH                               an online copy of the embedded SQLite database (VACUUM INTO) while the
                                            server runs; back up DATA_DIR/blobs beside it (Postgres: use pg_dump)`,
  ],
  [
    'signing rotate',
    `signing rotate                            a new URL-signing key in the database signs from now on; links signed
                                            with the old one stay valid until they expire (not with SIGNING_SECRET)`,
  ],
];

const usageOf = (entries: Array<[string, string]>) => `usage: gemforge admin <command>\n${entries.map(([, u]) => `  ${u}`).join('\n')}`;
const USAGE = `${usageOf(HELP)}

Acts on the server's data: DATA_DIR (default ./data) or DATABASE_URL, as the server reads them.
gemforge admin <command> --help prints one command's usage.`;

type Handler = (db: Db, args: string[]) => Promise<{ output: unknown; exitCode?: number }>;

function wholeNumber(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`${flag} must be a whole number ≥ 0, got "${value}"`);
  }
  return Number(value);
}

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`);
  return value;
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0];
}

type Values = Record<string, string | boolean | undefined>;

function parse(args: string[], options: ParseArgsConfig['options']): { values: Values; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({ args, options, allowPositionals: true, strict: true, allowNegative: true });
    return { values, positionals };
  } catch (error) {
    throw new UsageError(flagProblem(error as Error & { code?: string }, Object.keys(options ?? {})));
  }
}

/** Node's parseArgs message, said for this command line: the flag, what it takes, a close one. */
function flagProblem(error: Error & { code?: string }, flags: string[]): string {
  const flag = /'(--?[^' ]+)/.exec(error.message)?.[1];
  const known = flags.map((f) => `--${f}`).join(', ');
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && flag) {
    const close = suggest(flag.replace(/^-+/, ''), flags).map((f) => `--${f}`);
    return `unknown option ${flag}${close.length ? ` (did you mean ${close.join(' or ')}?)` : ''}; this command takes ${known || 'no options'}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && flag) {
    return /argument missing|argument is ambiguous/.test(error.message)
      ? `${flag} needs a value (${flag} VALUE; a value starting with "-" goes as ${flag}=VALUE)`
      : `${flag} takes no value`;
  }
  return error.message;
}

const STATES = ['active', 'blocked', 'unavailable'] as const;

async function showAccount(db: Db, id: string) {
  const { account, summary, fields, keys } = await accountOverview(db, systemClock, id);
  return {
    ...fields,
    outstandingReservations: summary.outstandingReservations,
    keys,
    ...describePolicies(account),
    limits: await limitsOf(db, loadConfig(), account),
    createdAt: account.created_at,
  };
}

/** `--queued-tasks 10` → 10; `default` (or '') → null, the server's setting again; absent → undefined. */
function capSetting(value: string | undefined, flag: string): number | null | undefined {
  if (value === 'default' || value === '') return null;
  return wholeNumber(value, flag);
}

/** `--network-allow 192.0.2.0/24,2001:db8::/32` → a list; `''` → [] (clears); absent → undefined. */
function list(value: string | boolean | undefined): string[] | undefined {
  if (typeof value !== 'string') return undefined;
  return value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
}

/** All of stdin, without the final line break (`--password-stdin`). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/**
 * Where the console is reached: --base-url, else PUBLIC_BASE_URL, else what the
 * running server recorded in DATA_DIR (public-url.ts), else this machine's PORT.
 */
function consoleUrl(baseUrl: string | boolean | undefined): string {
  const config = loadConfig();
  const base = typeof baseUrl === 'string' ? baseUrl : (config.publicBaseUrl ?? recordedServerUrl(config.dataDir) ?? `http://localhost:${config.port}`);
  if (!/^https?:\/\/[^\s]+$/.test(base)) throw new UsageError(`--base-url must be an http(s) URL, got "${base}"`);
  return `${base.replace(/\/+$/, '')}/console`;
}

const commands: Record<string, Handler> = {
  async providers(db, args) {
    const { values, positionals } = parse(args, { metrics: { type: 'string', multiple: true } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    return { output: await describeProviders(loadConfig(), (values.metrics as string[] | undefined) ?? [], db) };
  },
  async 'account create'(db, args) {
    const { values, positionals } = parse(args, {
      name: { type: 'string' },
      gems: { type: 'string' },
      'llm-allowance': { type: 'string' },
      'paid-consent': { type: 'boolean' },
    });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const gems = wholeNumber(values.gems as string | undefined, '--gems') ?? 0;
    const account = await accounts.createAccount(db, systemClock, {
      name: required(values.name as string | undefined, '--name'),
      llmAllowance: wholeNumber(values['llm-allowance'] as string | undefined, '--llm-allowance'),
      paidConsent: Boolean(values['paid-consent']),
    });
    if (gems > 0) await ledger.credit(db, systemClock, account.id, gems, 'admin: initial Gems');
    return { output: await showAccount(db, account.id) };
  },

  async 'account update'(db, args) {
    const { values, positionals } = parse(args, {
      gems: { type: 'string' },
      'llm-allowance': { type: 'string' },
      'paid-consent': { type: 'boolean' },
      state: { type: 'string' },
      'content-preference': { type: 'string' },
      'network-allow': { type: 'string' },
      'network-deny': { type: 'string' },
      'blocked-regions': { type: 'string' },
      'unknown-region': { type: 'string' },
      'local-concurrency': { type: 'string' },
      'remote-concurrency': { type: 'string' },
      'queued-tasks': { type: 'string' },
    });
    const id = onePositional(positionals, 'account ID');
    const state = values.state as string | undefined;
    if (state !== undefined && !STATES.includes(state as (typeof STATES)[number])) {
      throw new UsageError(`--state must be one of ${STATES.join(', ')}`);
    }
    const gems = wholeNumber(values.gems as string | undefined, '--gems');
    await accounts.updateAccount(db, systemClock, id, {
      llmAllowance: wholeNumber(values['llm-allowance'] as string | undefined, '--llm-allowance'),
      paidConsent: values['paid-consent'] as boolean | undefined,
      state: state as accounts.AccountPatch['state'],
      contentPreference: values['content-preference'] as string | undefined,
      networkAllow: list(values['network-allow']),
      networkDeny: list(values['network-deny']),
      blockedRegions: list(values['blocked-regions']),
      unknownRegion: values['unknown-region'] as string | undefined,
      localConcurrency: capSetting(values['local-concurrency'] as string | undefined, '--local-concurrency'),
      remoteConcurrency: capSetting(values['remote-concurrency'] as string | undefined, '--remote-concurrency'),
      queuedTasks: capSetting(values['queued-tasks'] as string | undefined, '--queued-tasks'),
    });
    if (gems !== undefined) await ledger.setBalance(db, systemClock, id, gems);
    return { output: await showAccount(db, id) };
  },

  async 'account show'(db, args) {
    const { positionals } = parse(args, {});
    return { output: await showAccount(db, onePositional(positionals, 'account ID')) };
  },

  async 'key create'(db, args) {
    const { values, positionals } = parse(args, {
      account: { type: 'string' },
      name: { type: 'string' },
      scopes: { type: 'string' },
      cap: { type: 'string' },
      expires: { type: 'string' },
    });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const scopes = required(values.scopes as string | undefined, '--scopes')
      .split(',')
      .map((s) => s.trim());
    for (const s of scopes) if (s !== 'read' && s !== 'generate') throw new UsageError(`unknown scope "${s}" (use read, generate)`);
    let expiresAt: Date | undefined;
    if (values.expires !== undefined) {
      expiresAt = new Date(values.expires as string);
      if (Number.isNaN(expiresAt.getTime()) || !/^\d{4}-\d{2}-\d{2}/.test(values.expires as string)) {
        throw new UsageError(`--expires must be an ISO-8601 date-time, got "${values.expires}"`);
      }
    }
    const { key, secret } = await accounts.createKey(db, systemClock, 'gf', {
      accountId: required(values.account as string | undefined, '--account'),
      name: required(values.name as string | undefined, '--name'),
      scopes: [...new Set(scopes)] as accounts.Scope[],
      monthlyCap: wholeNumber(values.cap as string | undefined, '--cap'),
      expiresAt,
    });
    return { output: { ...accounts.describeKey(key), secret, note: 'The secret is shown once; only its hash is stored.' } };
  },

  async 'key revoke'(db, args) {
    const { positionals } = parse(args, {});
    return { output: accounts.describeKey(await accounts.revokeKey(db, systemClock, onePositional(positionals, 'key ID'))) };
  },

  async 'key list'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const keys = await accounts.listKeys(db, required(values.account as string | undefined, '--account'));
    return { output: { keys: keys.map(accounts.describeKey) } };
  },

  async 'console invite'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' }, email: { type: 'string' }, 'base-url': { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const url = consoleUrl(values['base-url']);
    const accountId = required(values.account as string | undefined, '--account');
    const { login, token, expiresAt } = await consoleLogins.invite(db, systemClock, {
      accountId,
      email: required(values.email as string | undefined, '--email'),
    });
    return {
      output: {
        accountId,
        email: login.email,
        link: `${url}#invite=${token}`,
        expiresAt,
        note: 'The link is shown once and works once; send it to the account holder.',
      },
    };
  },

  async 'console login'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' }, email: { type: 'string' }, 'password-stdin': { type: 'boolean' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    if (values['password-stdin'] !== true) throw new UsageError('--password-stdin is required (a password never goes on the command line)');
    const accountId = required(values.account as string | undefined, '--account');
    const email = required(values.email as string | undefined, '--email');
    const login = await consoleLogins.setPassword(db, systemClock, { accountId, email, password: await readStdin() });
    return {
      output: {
        accountId,
        email: login.email,
        console: consoleUrl(undefined),
        note: 'Sign in at the console with this email and password; earlier sessions of this login ended.',
      },
    };
  },

  async 'console list'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const accountId = values.account as string | undefined;
    if (accountId !== undefined) await accounts.requireAccount(db, accountId);
    return { output: { logins: await consoleLogins.describeLogins(db, systemClock, accountId) } };
  },

  async 'console signout'(db, args) {
    const { values, positionals } = parse(args, { email: { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const email = required(values.email as string | undefined, '--email');
    return { output: { email, endedSessions: await consoleLogins.revokeSessionsOf(db, systemClock, email) } };
  },

  async 'ledger verify'(db, args) {
    parse(args, {});
    const report = await verifyLedger(db, [verifyTasks]);
    return { output: report, exitCode: report.ok ? 0 : 1 };
  },

  async backup(db, args) {
    const { positionals } = parse(args, {});
    const target = path.resolve(onePositional(positionals, 'PATH'));
    if (!isSqlite(db)) throw new UsageError('backup copies the embedded SQLite database; on Postgres use pg_dump (and copy the blob store)');
    if (fs.existsSync(target)) throw new UsageError(`${target} already exists; give a new file`);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    // One consistent copy, taken online: VACUUM INTO reads a snapshot while the server goes on writing (WAL).
    await copySqliteTo(db, target);
    return {
      output: {
        file: target,
        bytes: fs.statSync(target).size,
        note: 'restore: stop the server, put this file at DATA_DIR/gemforge.sqlite, with the blob store beside it',
      },
    };
  },

  async 'signing rotate'(db, args) {
    parse(args, {});
    if (process.env.SIGNING_SECRET) {
      throw new UsageError('SIGNING_SECRET is set: rotate by setting SIGNING_SECRET to a new secret and SIGNING_SECRET_PREVIOUS to the old one');
    }
    const id = await rotateSigningKey(db, systemClock.now().toISOString());
    return { output: { keyId: id, note: 'every instance signs with the new key within 5 s; links signed before stay valid until they expire' } };
  },

  async 'task settle'(db, args) {
    const { values, positionals } = parse(args, { failed: { type: 'boolean' }, succeeded: { type: 'boolean' } });
    const id = onePositional(positionals, 'task ID');
    if (Boolean(values.failed) === Boolean(values.succeeded)) throw new UsageError('give exactly one of --failed or --succeeded');
    try {
      const task = await operatorSettle(db, systemClock, id, values.failed ? 'failed' : 'succeeded');
      return { output: { id: task.id, status: task.status, reservationId: task.reservation_id } };
    } catch (error) {
      throw invalidInput((error as Error).message);
    }
  },

  async 'identity list'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const rows = (await idem.unresolved(db)).filter((r) => values.account === undefined || r.account_id === values.account);
    return { output: { identities: rows.map(idem.describeRecord) } };
  },

  async 'identity release'(db, args) {
    const { values, positionals } = parse(args, { pending: { type: 'boolean' } });
    if (positionals.length !== 2) throw new UsageError('expected KEY_ID and IDEMPOTENCY_KEY (see `gemforge admin identity list`)');
    try {
      const { record, releasedGems } = await idem.operatorRelease(db, systemClock, positionals[0], positionals[1], { pending: values.pending === true });
      return { output: { ...idem.describeRecord(record), releasedGems } };
    } catch (error) {
      throw invalidInput((error as Error).message);
    }
  },

  async 'moderation list'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' }, all: { type: 'boolean' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const accountId = values.account as string | undefined;
    if (accountId !== undefined) await accounts.requireAccount(db, accountId);
    return { output: { records: await moderation.listRecords(db, { accountId, all: values.all === true }) } };
  },

  async 'moderation clear'(db, args) {
    const { values, positionals } = parse(args, { account: { type: 'string' } });
    if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const accountId = required(values.account as string | undefined, '--account');
    await accounts.requireAccount(db, accountId);
    const result = await moderation.clearRecords(db, systemClock, accountId);
    return { output: { accountId, ...result, state: (await accounts.requireAccount(db, accountId)).state } };
  },
};

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h' || arg === 'help';

/**
 * Help asked for: `admin --help` (everything), `admin account --help` (that
 * group), `admin account create --help` (that command); undefined when not asked.
 */
function helpFor(argv: string[]): string | undefined {
  if (argv.length === 1 && isHelp(argv[0])) return USAGE;
  if (!argv.slice(1).some(isHelp)) return undefined;
  const words = argv.filter((a) => !isHelp(a) && !a.startsWith('-')).slice(0, 2);
  const matching = HELP.filter(([name]) => name === words.join(' ') || (words.length === 1 && name.startsWith(`${words[0]} `)));
  return matching.length > 0 ? usageOf(matching) : undefined;
}

/** The command names closest to what was typed, for "did you mean". */
function closest(argv: string[]): string[] {
  const typed = argv.slice(0, 2).join(' ');
  return suggest(typed, Object.keys(commands));
}

/**
 * The server's data is not here: a SQLite installation whose database file does
 * not exist (opening it would make an empty one and answer about nothing).
 */
function missingData(config: ReturnType<typeof loadConfig>): string | undefined {
  if (config.databaseUrl) return undefined;
  const file = sqliteFile(config.dataDir);
  if (fs.existsSync(file)) return undefined;
  return `no gemforge data here: ${file} does not exist. Start the server once (npm start) to create it, or point DATA_DIR at the server's data directory (DATABASE_URL at its Postgres database).`;
}

/** Runs one admin command; returns the process exit code. */
export async function runAdmin(argv: string[], io = { out: process.stdout, err: process.stderr }): Promise<number> {
  const help = helpFor(argv);
  if (help) {
    io.out.write(`${help}\n`);
    return 0;
  }
  // Commands are two words ("ledger verify"), or one ("backup").
  const twoWords = argv.slice(0, 2).join(' ');
  const name = Object.hasOwn(commands, twoWords) ? twoWords : (argv[0] ?? '');
  const handler = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!handler) {
    const close = argv.length ? closest(argv) : [];
    const hint = close.length ? ` (did you mean ${close.map((c) => `"gemforge admin ${c}"`).join(' or ')}?)` : '';
    io.err.write(`${argv.length ? `unknown command "gemforge admin ${argv.join(' ')}"${hint}\n\n` : ''}${USAGE}\n`);
    return 2;
  }
  const config = loadConfig();
  const absent = missingData(config);
  if (absent) {
    io.err.write(`gemforge admin ${name}: ${absent}\n`);
    return 2;
  }
  let db: Db | undefined;
  try {
    db = await openDb(config);
    const { output, exitCode = 0 } = await handler(db, argv.slice(name.split(' ').length));
    io.out.write(`${JSON.stringify(output, null, 2)}\n`);
    return exitCode;
  } catch (error) {
    if (error instanceof UsageError) {
      io.err.write(`gemforge admin ${name}: ${error.message}\n`);
      return 2;
    }
    const failure = cliFailureOf(error);
    io.err.write(`gemforge admin ${name}: ${failure.message}\n`);
    return failure.exitCode;
  } finally {
    await db?.destroy();
  }
}
