/**
 * What embedded moderation costs on text shaped to make it work hard
 * (test/helpers/hostile-prompts.ts), measured two ways:
 *
 * 1. In process: each shape at 3,000, 10,000 and 30,000 characters, a new text
 *    each round (so no round reuses the last one's words), the process's CPU
 *    time. Target: the worst shape's median at 30,000 characters under 20 ms,
 *    and each shape linear: its cost per character, the cheapest round of each
 *    length, growing at most 1.5 times from any length to a longer one
 *    (bench/linearity.ts, robust to sub-millisecond noise); and
 *    after 300 new 30,000-character texts, under 16 MiB of heap kept (the
 *    policy's caches must not keep what hostile text brings).
 * 2. At the real server (as `npm start` runs it, a temp DATA_DIR): each shape
 *    as a 30,000-character image prompt from a key whose account holds 0 Gems
 *    (moderation runs before anything is reserved), while /healthz is asked
 *    every few milliseconds. Target: every answer within 50 ms, and /healthz
 *    never waiting longer than that. Beside the wall times, the CPU the server's
 *    main thread spent per answer (Linux: /proc/PID/schedstat; the /healthz
 *    calls in between included), which a loaded machine inflates far less.
 *    Long texts are judged on the server's moderation threads (off-thread.ts):
 *    the first one, which starts a thread, is sent before the rows and reported
 *    on its own line.
 * 3. An ordinary submission: what moderating a short everyday prompt costs (the
 *    provider's `moderate`, as a submission calls it, the language check
 *    included), side by side with the same on the policy as it was before the
 *    intent rules (`--before`, a commit read with `git archive` into a temp
 *    dir), in alternating rounds, for the benchmarks' image prompt repeated
 *    (what bench:http sends) and for the labelled set's everyday prompts in
 *    turn. Target: no more CPU per submission than before the intent rules.
 * 4. Submissions at the server (`--only submissions`, beside `--baseline DIR`: a detached
 *    worktree of another commit with node_modules linked, e.g.
 *    `git worktree add --detach /tmp/base ec5ba0c^ && ln -s $PWD/node_modules /tmp/base/`):
 *    both servers with the embedded defaults (the learned classifier as the server builds it)
 *    and the worker off, so a submission is validated, moderated, reserved and queued; then
 *    rounds of autocannon POSTs of image submissions that rotate the labelled sets' everyday
 *    prompts (those both servers serve), a fresh Idempotency-Key each, the two servers in
 *    alternating order. Prints requests/s, p50 and p99 per side (medians of the rounds) and the
 *    median of the rounds' ratios. Target: this tree at least 0.97 × the baseline's requests/s
 *    (within the machine's noise of it, not lower).
 *
 *   npm run bench:moderation [-- --rounds 7 --before ec5ba0c^ --only shapes,ordinary,server,submissions --baseline DIR --seconds 4]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadModerationPolicy } from '../server/providers/moderation/policy-file.ts';
import { categoriesOf } from '../server/providers/moderation/local.ts';
import { embeddedProvider } from '../server/providers/moderation/index.ts';
import { parseModeration } from '../server/config.ts';
import type { ModerationProvider } from '../server/providers/moderation/types.ts';
import { openDb } from '../server/storage/db.ts';
import * as accounts from '../server/domain/accounts.ts';
import { systemClock } from '../server/domain/clock.ts';
import { root, runLoad, runMain, startGemforge, type Started } from './bench/processes.ts';
import type { LoadJob, LoadResult } from './bench/types.ts';
import { quantile } from './bench/quantile.ts';
import { judgeLinearity } from './bench/linearity.ts';
import { hostilePrompt, PROMPT_SHAPES, type PromptShape } from '../test/helpers/hostile-prompts.ts';
import { IMAGE } from './bench/fixture.ts';
import { readSets } from './moderation/eval-set.ts';

/** The last commit before the intent rules (the ordinary-submission row's "before"). */
const BEFORE_INTENT_RULES = 'ec5ba0c^';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    before: { type: 'string', default: BEFORE_INTENT_RULES },
    only: { type: 'string' },
    baseline: { type: 'string' },
    seconds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '8' },
  },
});
const PARTS = new Set((values.only ?? `shapes,ordinary,server${values.baseline === undefined ? '' : ',submissions'}`).split(',').map((p) => p.trim()));
const ROUNDS = Number(values.rounds);
v8.setFlagsFromString('--expose-gc'); // for the heap-kept row: a collection before and after
const SHAPES = Object.keys(PROMPT_SHAPES) as PromptShape[];
const IN_PROCESS_TARGET_MS = 20;
const SERVER_TARGET_MS = 50;
const RETAINED_TARGET_MIB = 16;

/** The process's CPU time in ms (the bench's one busy thread, plus the garbage collector's helpers). */
function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

function inProcess(): boolean {
  const policy = loadModerationPolicy(path.join(root, 'server/catalog/moderation.yaml'));
  categoriesOf(policy, 'warm up: kill the lights, bomb shelter', 'standard');
  let worst = 0;
  let linear = true;
  console.log('shape               3,000 chars (median, max)   10,000 (median)   30,000 chars (median, max)   cost per character ×');
  for (const shape of SHAPES) {
    const at = (length: number) => {
      const costs: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const text = hostilePrompt(shape, length, length * 1000 + round);
        const start = cpuMs();
        categoriesOf(policy, text, 'strict');
        costs.push(cpuMs() - start);
      }
      return { length, costs, median: median(costs), max: Math.max(...costs) };
    };
    const [short, middle, long] = [at(3_000), at(10_000), at(30_000)];
    const judged = judgeLinearity([short, middle, long]);
    worst = Math.max(worst, long.median);
    linear &&= judged.linear;
    console.log(
      `${shape.padEnd(20)}${`${fmt(short.median)}, ${fmt(short.max)}`.padEnd(28)}${fmt(middle.median).padEnd(18)}${`${fmt(long.median)}, ${fmt(long.max)}`.padEnd(29)}${judged.steps.map((g) => g.toFixed(2)).join(', ')}; ${judged.growth.toFixed(2)} overall${judged.linear ? '' : ' (NOT LINEAR)'}`,
    );
  }
  // What reading ever-new hostile texts leaves behind (the policy's caches keep short words only).
  const gc = runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < 300; i++) categoriesOf(policy, hostilePrompt(SHAPES[i % SHAPES.length]!, 30_000, 9_000_000 + i), 'strict');
  gc();
  const retainedMib = (process.memoryUsage().heapUsed - before) / 1048576;
  const pass = worst < IN_PROCESS_TARGET_MS && linear && retainedMib < RETAINED_TARGET_MIB;
  console.log(
    `worst median at 30,000 characters: ${fmt(worst)} (target < ${IN_PROCESS_TARGET_MS} ms), linear: ${linear ? 'yes' : 'NO'}; heap kept after 300 new 30,000-character texts: ${retainedMib.toFixed(1)} MiB (target < ${RETAINED_TARGET_MIB}): ${pass ? 'PASS' : 'FAIL'}`,
  );
  return pass;
}

/** The on-CPU time of a process's main thread (its event loop) in ms, from /proc (Linux); undefined elsewhere. */
function mainThreadCpuMs(pid: number | undefined): number | undefined {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
}

async function atServer(): Promise<boolean> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-moderation-'));
  const db = await openDb({ dataDir });
  const account = await accounts.createAccount(db, systemClock, { name: 'bench' });
  const { secret } = await accounts.createKey(db, systemClock, 'gf', { accountId: account.id, name: 'bench', scopes: ['read', 'generate'] });
  await db.destroy();
  const server = await startGemforge(
    { DATA_DIR: dataDir, LOG_LEVEL: 'warn', NODE_ENV: 'production', MODERATION_BLOCK_THRESHOLD: '1000000' },
    path.join(dataDir, 'server.log'),
  );
  let polling = true;
  const health: number[] = [];
  try {
    const submit = async (prompt: string, n: number) => {
      const started = performance.now();
      const res = await fetch(`${server.base}/api/generate/image`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': `bench-moderation-${n}` },
        body: JSON.stringify({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } }),
      });
      await res.arrayBuffer();
      return { status: res.status, ms: performance.now() - started };
    };
    await submit('a lighthouse at dawn', 0); // warm-up: validator, policy, database
    // The first long text starts a moderation thread (it loads the policy); reported apart, not in the rows.
    const first = await submit(hostilePrompt('prose', 30_000, 6_999_999), 999_999);
    console.log(`the first long text after start (its moderation thread starts): answered in ${fmt(first.ms)}`);
    const poller = (async () => {
      while (polling) {
        const started = performance.now();
        await (await fetch(`${server.base}/healthz`)).arrayBuffer();
        health.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    let worst = 0;
    let worstCpu = 0;
    let n = 1;
    for (const shape of SHAPES) {
      const times: number[] = [];
      const statuses = new Set<number>();
      const cpuBefore = mainThreadCpuMs(server.child.pid);
      for (let round = 0; round < ROUNDS; round++) {
        const answer = await submit(hostilePrompt(shape, 30_000, 7_000_000 + n), n++);
        times.push(answer.ms);
        statuses.add(answer.status);
      }
      const cpuAfter = mainThreadCpuMs(server.child.pid);
      const cpu = cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / ROUNDS;
      worst = Math.max(worst, median(times));
      worstCpu = Math.max(worstCpu, cpu ?? 0);
      const cpuNote = cpu === undefined ? '' : `; server main thread ${fmt(cpu)} of CPU per answer`;
      console.log(`${shape.padEnd(20)}answered in ${fmt(median(times))} median, ${fmt(Math.max(...times))} max (${[...statuses].join('/')})${cpuNote}`);
    }
    polling = false;
    await poller;
    const healthMax = Math.max(...health);
    const pass = worst <= SERVER_TARGET_MS && healthMax <= SERVER_TARGET_MS;
    console.log(
      `at the server: worst median ${fmt(worst)} (target ≤ ${SERVER_TARGET_MS} ms); /healthz p50 ${fmt(median(health))}, max ${fmt(healthMax)} over ${health.length} calls: ${pass ? 'PASS' : 'FAIL'}${worstCpu > 0 ? ` (the most CPU per answer: ${fmt(worstCpu)})` : ''}`,
    );
    return pass;
  } finally {
    polling = false;
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The embedded provider as it was at `rev`: its moderation folder and policy file read out of
 * git into a temp dir (with this checkout's node_modules), loaded beside today's; undefined
 * (with the reason printed) where there is no such history.
 */
async function providerAt(rev: string, dir: string): Promise<ModerationProvider | undefined> {
  try {
    // The provider's folder, its policy, and the server modules it imports at that commit (later commits moved
    // shared helpers up to server/; git archive refuses a path the commit lacks, so only those it has).
    const shared = ['server/yaml-file.ts', 'server/write-whole.ts', 'server/threads.ts', 'server/memory.ts'];
    const present = execFileSync('git', ['ls-tree', '--name-only', rev, '--', ...shared], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    const archive = execFileSync('git', ['archive', rev, 'server/providers/moderation', 'server/catalog/moderation.yaml', ...present], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 << 20,
    });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
  } catch (error) {
    console.log(`ordinary submission: not measured, ${rev} could not be read from git (${(error as Error).message.split('\n')[0]})`);
    return undefined;
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  const moderation = path.join(dir, 'server/providers/moderation');
  const policyFile = (await import(pathToFileURL(path.join(moderation, 'policy-file.ts')).href)) as { loadModerationPolicy(file: string): unknown };
  const local = (await import(pathToFileURL(path.join(moderation, 'local.ts')).href)) as { embeddedModeration(policy: unknown): ModerationProvider };
  return local.embeddedModeration(policyFile.loadModerationPolicy(path.join(dir, 'server/catalog/moderation.yaml')));
}

async function ordinarySubmission(): Promise<boolean> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-moderation-before-'));
  try {
    const before = await providerAt(values.before, dir);
    if (before === undefined) return true;
    // Today's provider as the server builds it: the learned classifier only where MODERATION_CLASSIFIER turns it on.
    const { moderationClassifier } = parseModeration(process.env);
    const now = embeddedProvider(loadModerationPolicy(path.join(root, 'server/catalog/moderation.yaml')), { classifier: moderationClassifier });
    console.log(`ordinary submission: today's embedded policy with the learned classifier ${moderationClassifier ? 'on' : 'off'} (MODERATION_CLASSIFIER)`);
    const everyday = everydayPrompts();
    const kinds: Array<[string, string[]]> = [
      ['image prompt, repeated', [IMAGE.prompt]],
      [`${everyday.length} everyday prompts in turn`, everyday],
    ];
    const CALLS = 2_000;
    const perCall = async (provider: ModerationProvider, prompts: string[]) => {
      const start = cpuMs();
      for (let i = 0; i < CALLS; i++) await provider.moderate({ texts: [{ field: 'prompt', text: prompts[i % prompts.length]! }], preference: 'standard' });
      return ((cpuMs() - start) * 1000) / CALLS;
    };
    let pass = true;
    for (const [name, prompts] of kinds) {
      // Warm both (caches, JIT), then alternate, so a busy moment slows both sides alike.
      await perCall(before, prompts);
      await perCall(now, prompts);
      const times: [number[], number[]] = [[], []];
      for (let round = 0; round < ROUNDS * 2; round++) {
        times[0].push(await perCall(before, prompts));
        times[1].push(await perCall(now, prompts));
      }
      const [was, is] = [median(times[0]), median(times[1])];
      const met = is <= was;
      pass &&= met;
      console.log(
        `ordinary submission, ${name}: ${is.toFixed(1)} µs of CPU to moderate, ${was.toFixed(1)} µs at ${values.before}${values.before === BEFORE_INTENT_RULES ? ' (before the intent rules)' : ''}: ×${(is / was).toFixed(2)} (target ≤ ×1.00): ${met ? 'PASS' : 'FAIL'}`,
      );
    }
    return pass;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The everyday prompts of the labelled sets (benign text of the kind a service receives all day). */
const everydayPrompts = () => readSets().flatMap((s) => s.samples.filter((x) => !x.harmful && x.group === 'everyday').map((x) => x.text));

/** Requests/s of this tree at least this share of the baseline's: the machine's round-to-round noise. */
const SUBMISSIONS_TARGET = 0.97;

interface Side {
  name: string;
  server: Started;
  dataDir: string;
  secret: string;
  rounds: LoadResult[];
}

/** A server of `tree` on a new data dir holding an account with Gems and a key, its worker off (submissions only queue). */
async function startSide(name: string, tree: string): Promise<Side> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-bench-submissions-'));
  // Seeded by the tree's own code, so each database is of its own schema.
  const seeded = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'scripts/seed-history.ts', '--data-dir', dataDir, '--entries', '1', '--gems', '1000000000000'],
    {
      cwd: tree,
      encoding: 'utf8',
    },
  );
  if (seeded.status !== 0) throw new Error(`seeding ${name} failed: ${seeded.stderr}`);
  const { secret } = JSON.parse(seeded.stdout.trim().split('\n').pop()!) as { secret: string };
  const server = await startGemforge(
    { DATA_DIR: dataDir, LOG_LEVEL: 'warn', NODE_ENV: 'production', WORKER_ENABLED: 'false', MODERATION_BLOCK_THRESHOLD: '1000000' },
    path.join(dataDir, 'server.log'),
    undefined,
    tree,
  );
  return { name, server, dataDir, secret, rounds: [] };
}

async function submissionThroughput(): Promise<boolean> {
  const trees: Array<[string, string]> = [['this tree', root]];
  if (values.baseline !== undefined) {
    const dir = path.resolve(values.baseline);
    const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).stdout.trim();
    trees.push([`baseline ${commit}`, dir]);
  }
  const sides: Side[] = [];
  try {
    for (const [name, tree] of trees) sides.push(await startSide(name, tree));
    const submit = async (side: Side, prompt: string) => {
      const res = await fetch(`${side.server.base}/api/generate/image`, {
        method: 'POST',
        headers: { authorization: `Bearer ${side.secret}`, 'content-type': 'application/json', 'idempotency-key': `check-${crypto.randomUUID()}` },
        body: JSON.stringify({ ...IMAGE, prompt }),
      });
      await res.arrayBuffer();
      return res.status;
    };
    // Only prompts both sides serve: a refusal answers sooner than a submission and would flatter the side that refuses.
    const served: string[] = [];
    for (const prompt of everydayPrompts()) {
      let both = true;
      for (const side of sides) both = (await submit(side, prompt)) === 202 && both;
      if (both) served.push(prompt);
    }
    if (served.length === 0) throw new Error('no everyday prompt is served by every side');
    console.log(`submissions: ${served.length} everyday prompts served by ${sides.map((s) => s.name).join(' and ')}, rotated, a fresh Idempotency-Key each`);
    const job = (side: Side, warmupSeconds: number, durationSeconds: number): LoadJob => ({
      kind: 'autocannon',
      url: `${side.server.base}/api/generate/image`,
      method: 'POST',
      headers: { authorization: `Bearer ${side.secret}`, 'content-type': 'application/json' },
      bodies: served.map((prompt) => JSON.stringify({ ...IMAGE, prompt })),
      freshIdempotencyKey: true,
      connections: Number(values.connections),
      warmupSeconds,
      durationSeconds,
      serverPid: side.server.child.pid,
    });
    const seconds = Number(values.seconds);
    for (const side of sides) await runLoad<LoadResult>(job(side, 0, seconds)); // warm-up: JIT, caches, the model read
    for (let round = 0; round < ROUNDS; round++) {
      // Alternating which side goes first, so the machine's other load hits both alike.
      for (const side of round % 2 ? [...sides].reverse() : sides) {
        const result = await runLoad<LoadResult>(job(side, 1, seconds));
        const other = Object.entries(result.statuses).filter(([status]) => status !== '202');
        if (result.errors > 0 || other.length > 0) throw new Error(`${side.name}: ${result.errors} errors, statuses ${JSON.stringify(result.statuses)}`);
        side.rounds.push(result);
        console.log(`  round ${round + 1}, ${side.name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms`);
      }
    }
    for (const side of sides) {
      const of = (f: (r: LoadResult) => number) => median(side.rounds.map(f));
      console.log(
        `submissions, ${side.name}: ${of((r) => r.rps).toFixed(0)} req/s, p50 ${of((r) => r.p50).toFixed(1)} ms, p99 ${of((r) => r.p99).toFixed(1)} ms${side.rounds[0]!.cpuUs === undefined ? '' : `, ${of((r) => r.cpuUs!).toFixed(0)} µs of server CPU per submission`} (median of ${ROUNDS} rounds)`,
      );
    }
    const [now, base] = sides;
    if (base === undefined) return true;
    const ratio = median(now.rounds.map((r, i) => r.rps / base.rounds[i]!.rps));
    const pass = ratio >= SUBMISSIONS_TARGET;
    console.log(
      `submissions: this tree ×${ratio.toFixed(2)} the requests/s of ${base.name} (median of the rounds' ratios; target ≥ ×${SUBMISSIONS_TARGET}): ${pass ? 'PASS' : 'FAIL'}`,
    );
    return pass;
  } finally {
    for (const side of sides) {
      await side.server.stop();
      fs.rmSync(side.dataDir, { recursive: true, force: true });
    }
  }
}

async function main(): Promise<number> {
  const local = PARTS.has('shapes') ? inProcess() : true;
  const ordinary = PARTS.has('ordinary') ? await ordinarySubmission() : true;
  const server = PARTS.has('server') ? await atServer() : true;
  const submissions = PARTS.has('submissions') ? await submissionThroughput() : true;
  return local && ordinary && server && submissions ? 0 : 1;
}

runMain(main);
