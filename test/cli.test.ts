/**
 * The gemforge CLI as a subprocess (`node scripts/gemforge.mjs …`) against a
 * real test server: an image to a PNG on disk, --json, errors with the spec's
 * code and a hint, models, streamed text, resuming a task, and a time-out that
 * prints the resume command without resubmitting.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { startTestServer, type TestServer } from './helpers/server.ts';
import * as media from './helpers/media.ts';
import { run, type Run } from './helpers/run.ts';
import { COMMANDS } from '../client/cli/commands.ts';
import CLIENT_PACKAGE from '../client/package.json' with { type: 'json' };

const BIN = path.resolve(import.meta.dirname, '../scripts/gemforge.mjs');

function gemforge(args: string[], env: Record<string, string>): Promise<Run> {
  return run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
}

describe('gemforge CLI', () => {
  let s: TestServer;
  let env: Record<string, string>;
  let dir: string;
  before(async () => {
    s = await startTestServer({ env: { WORKER_POLL_MS: '20', TEXT_STREAM_DELAY_MS: '0' } });
    const u = await s.user({ gems: 10_000, llmAllowance: 10_000 });
    env = { GEMFORGE_API_KEY: u.secret, GEMFORGE_BASE_URL: s.url, GEMFORGE_POLL_SCHEDULE_MS: '100' };
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-cli-'));
  });
  after(async () => {
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when an image is asked for with --out, then a real PNG lands in the folder and its path is printed', async () => {
    const out = path.join(dir, 'fox');
    const run = await gemforge(['image', 'a red fox', '--model', 'gemforge-image-1', '--out', out, '--param', 'resolution=512', '--param', 'ratio=4:3'], env);
    assert.equal(run.code, 0, run.stderr);
    const printed = run.stdout.trim().split('\n');
    assert.equal(printed.length, 1);
    assert.equal(path.dirname(printed[0]), out);
    const meta = await sharp(printed[0]).metadata();
    assert.equal(meta.format, 'png');
    assert.equal(meta.width, 512);
    assert.equal(meta.height, 384);
    assert.match(run.stderr, /task task_\w+ created .*Idempotency-Key gf-/);
    assert.match(run.stderr, /succeeded: 2 Gems charged/);
  });

  it('when --json is given, then stdout is one JSON document with the task, the files and the identity', async () => {
    const run = await gemforge(
      ['image', 'a blue fox', '--out', path.join(dir, 'json'), '--param', 'resolution=512', '--param', 'outputCount=2', '--json'],
      env,
    );
    assert.equal(run.code, 0, run.stderr);
    const result = JSON.parse(run.stdout) as {
      task: { status: string; id: string };
      files: Array<{ path: string; mimeType: string }>;
      idempotencyKey: string;
      created: boolean;
    };
    assert.equal(result.task.status, 'succeeded');
    assert.equal(result.files.length, 2);
    assert.equal(result.created, true);
    for (const f of result.files) assert.equal((await sharp(f.path).metadata()).format, 'png');

    // The same --idempotency-key replays the task instead of making new work.
    const replay = await gemforge(
      [
        'image',
        'a blue fox',
        '--out',
        path.join(dir, 'json2'),
        '--param',
        'resolution=512',
        '--param',
        'outputCount=2',
        '--json',
        '--idempotency-key',
        result.idempotencyKey,
      ],
      env,
    );
    const again = JSON.parse(replay.stdout) as typeof result;
    assert.equal(again.created, false);
    assert.equal(again.task.id, result.task.id);
  });

  it('when the key is wrong, then the spec code and a hint are printed and the exit code is non-zero', async () => {
    const run = await gemforge(['image', 'a fox', '--model', 'gemforge-image-1'], { ...env, GEMFORGE_API_KEY: `gf_${'0'.repeat(64)}` });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /error: INVALID_API_KEY \(HTTP 401\)/);
    assert.match(run.stderr, /hint: .*GEMFORGE_API_KEY/);
    const json = await gemforge(['models', '--json'], { ...env, GEMFORGE_API_KEY: 'nope' });
    assert.equal(json.code, 1);
    assert.equal((JSON.parse(json.stdout) as { error: { code: string } }).error.code, 'INVALID_API_KEY');
    const missing = await gemforge(['models'], { GEMFORGE_BASE_URL: s.url });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /GEMFORGE_API_KEY/);
  });

  it('when a price is over --max-gems, then PRICE_CHANGED is printed with its hint and nothing is retried', async () => {
    const run = await gemforge(['image', 'a fox', '--model', 'gemforge-image-1', '--max-gems', '0'], env);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /error: PRICE_CHANGED \(HTTP 409\)/);
    assert.match(run.stderr, /hint: .*--max-gems/);
    assert.doesNotMatch(run.stderr, /retrying/);
  });

  it('when models are listed, then each model is a line with its kind', async () => {
    const run = await gemforge(['models'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^gemforge-image-1\s+image\s/m);
    assert.match(run.stdout, /^gemforge-text-1\s+text\s/m);
    const json = JSON.parse((await gemforge(['models', '--json'], env)).stdout) as { accountingPeriod: string };
    assert.equal(json.accountingPeriod, 'UTC calendar month');
  });

  it('when text is streamed, then the answer is printed; an errored stream exits non-zero with the key to replay', async () => {
    const run = await gemforge(['text', 'hi', '--model', 'gemforge-text-1', '--stream'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /You said: "hi"/);
    const plain = await gemforge(['text', 'hello there', '--system', 'Be brief.', '--max-tokens', '200'], env);
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stdout, /hello there/);
    const broken = await gemforge(['text', 'break [[scenario:stream-error]]', '--stream'], env);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /error: PROVIDER_ERROR/);
    assert.match(broken.stderr, /--idempotency-key gf-[\w-]+/);
  });

  it('when an answer is cut by --max-tokens, then the CLI says so on stderr, streamed or not; a whole answer gets no note', async () => {
    for (const stream of [[], ['--stream']]) {
      const cut = await gemforge(['text', 'tell me a long story about foxes and rivers', '--max-tokens', '3', ...stream], env);
      assert.equal(cut.code, 0, cut.stderr);
      assert.match(cut.stderr, /note: the answer was cut at --max-tokens \(3\) \(finish_reason: length\)/);
    }
    const whole = await gemforge(['text', 'hi', '--max-tokens', '500'], env);
    assert.doesNotMatch(whole.stderr, /cut/);
  });

  it('when a video is asked for without --param mode, then the CLI picks the mode from the inputs and says so', async () => {
    const out = path.join(dir, 'clip');
    const run = await gemforge(['video', 'waves on a cliff', '--model', 'gemforge-video-lite-1', '--param', 'duration=4', '--out', out], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /mode: text-to-video \(no sourceImage given; choose with --param mode=…\)/);
    const image = await gemforge(['upload', await media.image('png', 640, 360), '--type', 'image/png'], env);
    const assetId = image.stdout.trim().split(/\s+/)[0]!;
    assert.match(assetId, /^asset_/, image.stdout);
    const i2v = await gemforge(
      ['video', 'the camera dollies in', '--model', 'gemforge-video-1', '--param', 'duration=4', '--param', `sourceImage=${assetId}`, '--out', out],
      env,
    );
    assert.equal(i2v.code, 0, i2v.stderr);
    assert.match(i2v.stderr, /mode: image-to-video \(a sourceImage is given/);
  });

  it('when the wait times out, then the task ID and the resume command are printed; the resume command saves the output', async () => {
    const out = path.join(dir, 'slow');
    const run = await gemforge(['image', 'slow fox [[scenario:processing:2]]', '--param', 'resolution=512', '--out', out, '--timeout', '0.3'], env);
    assert.equal(run.code, 75, run.stderr);
    const resume = run.stderr.match(/gemforge (task (task_\w+) --wait --out (\S+))/);
    assert.ok(resume, run.stderr);
    assert.equal(resume[3], out);
    assert.match(run.stderr, /nothing was resubmitted/);
    const again = await gemforge(resume[1].split(' '), env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((await sharp(again.stdout.trim()).metadata()).format, 'png');
    const show = await gemforge(['task', resume[2]], env);
    assert.match(show.stdout, new RegExp(`^${resume[2]} succeeded`));
  });

  it('when Ctrl-C comes while waiting, then the CLI stops with the task ID and the resume command, exit 130', async () => {
    const child = spawn(process.execPath, [BIN, 'image', 'slow fox [[scenario:processing:5]]', '--param', 'resolution=512', '--out', path.join(dir, 'int')], {
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    let stderr = '';
    let interrupted = false;
    child.stderr.on('data', (d) => {
      stderr += d;
      // One Ctrl-C only: a second one after the CLI's handler is gone would end it by the signal.
      if (/task task_\w+ created/.test(stderr) && !interrupted) {
        interrupted = true;
        setTimeout(() => child.kill('SIGINT'), 300);
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 130, stderr);
    assert.match(stderr, /interrupted: task (task_\w+) goes on \(nothing was resubmitted\)/);
    assert.match(stderr, /gemforge task task_\w+ --wait --out /);
  });

  it('when media is uploaded and voices are listed, then IDs are printed', async () => {
    const upload = await gemforge(['upload', await media.image('png')], env);
    assert.equal(upload.code, 0, upload.stderr);
    assert.match(upload.stdout.trim(), /^\S+$/);
    const voices = await gemforge(['voices', '--scope', 'explore', '--language', 'en'], env);
    assert.equal(voices.code, 0, voices.stderr);
    assert.ok(voices.stdout.trim().split('\n').length > 1);
    const noRights = await gemforge(['voices', 'add', await media.speech(20), '--duration', '20'], env);
    assert.equal(noRights.code, 2);
    assert.match(noRights.stderr, /--rights-confirmed/);
  });

  it('when a command or flag is unknown, then the usage is printed with exit code 2', async () => {
    assert.equal((await gemforge(['paint', 'x'], env)).code, 2);
    const bad = await gemforge(['image', 'x', '--colour', 'red'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /usage: gemforge/);
  });

  it('when --version, help or a command --help is asked for, then the version, every command, and the command with its options and an example are printed', async () => {
    const version = await gemforge(['--version'], {});
    assert.equal(version.code, 0);
    assert.equal(version.stdout.trim(), CLIENT_PACKAGE.version);
    for (const args of [['help'], ['--help']]) {
      const help = await gemforge(args, {});
      assert.equal(help.code, 0);
      for (const command of Object.keys(COMMANDS)) assert.match(help.stdout, new RegExp(`^  ${command} `, 'm'), `${command} is listed`);
    }
    for (const args of [
      ['image', '--help'],
      ['help', 'image'],
    ]) {
      const image = await gemforge(args, {});
      assert.equal(image.code, 0);
      assert.match(image.stdout, /^usage: gemforge image "prompt"/);
      assert.match(image.stdout, /--max-gems N\s+refuse/);
      assert.match(image.stdout, /example:\n  gemforge image "/);
    }
    const voices = await gemforge(['voices', '-h'], {});
    assert.match(voices.stdout, /usage: gemforge voices .*\n\s+gemforge voices add FILE/);
  });

  it('when a command or an option is mistyped, then the closest one is suggested', async () => {
    const command = await gemforge(['imgae', 'a fox'], env);
    assert.equal(command.code, 2);
    assert.match(command.stderr, /unknown command "imgae" \(did you mean "image"\?\)/);
    const option = await gemforge(['text', 'hi', '--stram'], env);
    assert.equal(option.code, 2);
    assert.match(option.stderr, /unknown option --stram \(did you mean --stream\?\)/);
    assert.match(option.stderr, /usage: gemforge text/);
    assert.doesNotMatch((await gemforge(['paint', 'x'], env)).stderr, /did you mean/);
  });

  it('when no server listens at the base URL, then the CLI says so at once; a spending command names its identity', async () => {
    const closed = await closedPortUrl();
    const noServer = { ...env, GEMFORGE_BASE_URL: closed };
    const models = await gemforge(['models'], noServer);
    assert.equal(models.code, 1);
    assert.equal(models.stderr, `error: no server at ${closed} (is it running? set GEMFORGE_BASE_URL)\n`);
    for (const args of [
      ['image', 'a fox', '--model', 'gemforge-image-1'],
      ['image', 'a fox'],
      ['text', 'hi', '--stream'],
    ]) {
      const spend = await gemforge(args, noServer);
      assert.equal(spend.code, 1);
      assert.match(spend.stderr, /^error: no server at http:\/\/127\.0\.0\.1:\d+ \(is it running\? set GEMFORGE_BASE_URL\)\n/);
      assert.match(spend.stderr, /idempotency key: (gf-[\w-]+)\. Nothing reached the server; once it runs, rerun the same command with --idempotency-key \1\n/);
      assert.doesNotMatch(spend.stderr, /retrying/, 'not retried with backoff');
    }
    const json = await gemforge(['image', 'a fox', '--json', '--idempotency-key', 'mine-1'], noServer);
    assert.deepEqual(JSON.parse(json.stdout), {
      error: { message: `no server at ${closed} (is it running? set GEMFORGE_BASE_URL)`, idempotencyKey: 'mine-1' },
    });
  });

  it('when admin or worker is asked of the API CLI outside the repository, then it says they run with the server', async () => {
    const { runCli } = await import('../client/cli/main.ts');
    let stderr = '';
    const io = { stdout: process.stdout, stderr: { write: (t: string) => ((stderr += t), true) } as unknown as NodeJS.WritableStream, env: {} };
    assert.equal(await runCli(['admin', 'key', 'create'], io), 2);
    assert.match(stderr, /"admin" runs with the server/);
  });
});

describe('gemforge voices --model (the voices a speech model can use)', () => {
  let s: TestServer;
  let env: Record<string, string>;
  const [AVERY, CARTER] = ['voice_d3aaf74203c48ce692bb5225', 'voice_c5f1a4a68678135c9ac1a776'];
  before(async () => {
    // A speech model served upstream speaks only its mapped voices; a list calls no upstream, so nothing serves this address.
    s = await startTestServer({
      env: {
        SPEECH_UPSTREAM_URL: 'http://127.0.0.1:9/v1',
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${AVERY}=alloy,${CARTER}=onyx`,
      },
    });
    env = { GEMFORGE_API_KEY: (await s.user()).secret, GEMFORGE_BASE_URL: s.url };
  });
  after(async () => {
    await s?.close();
  });

  it('when --model names a remote speech model, then only the voices it can speak with are printed, and the count says so', async () => {
    const all = await gemforge(['voices', '--scope', 'explore'], env);
    assert.equal(all.code, 0, all.stderr);
    assert.ok(all.stdout.trim().split('\n').length > 2);
    const usable = await gemforge(['voices', '--scope', 'explore', '--model', 'gemforge-speech-1'], env);
    assert.equal(usable.code, 0, usable.stderr);
    const ids = usable.stdout
      .trim()
      .split('\n')
      .map((line) => line.split(/\s+/)[0]);
    assert.deepEqual(ids.sort(), [AVERY, CARTER].sort());
    assert.match(usable.stderr, /^page 1: 2 of 2 voices gemforge-speech-1 can speak with\n$/);
    const json = await gemforge(['voices', '--scope', 'explore', '-m', 'gemforge-speech-1', '--json'], env);
    assert.equal((JSON.parse(json.stdout) as { total: number }).total, 2);
  });

  it('when --model is not a speech model, then the spec code is printed and the exit code is 1', async () => {
    const run = await gemforge(['voices', '--scope', 'explore', '--model', 'gemforge-image-1'], env);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /error: MODEL_UNAVAILABLE \(HTTP 422\)/);
  });
});

/** A URL where nothing listens: a port that was free a moment ago. */
async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}
