/**
 * The designer's watch mode: `npm run dev` regenerates the
 * types and restarts the server when the contract changes, and when a change
 * breaks the contract it prints the linter's message and keeps the last good
 * server running. Driven on a copy of the contract, with its own output file.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './helpers/ports.ts';
import { until } from './helpers/poll.ts';
import { withOperation } from './helpers/contract-edit.ts';

const root = path.resolve(import.meta.dirname, '..');

describe('npm run dev', () => {
  let dir: string;
  let contract: string;
  let generated: string;
  let consoleContract: string;
  let consoleGenerated: string;
  let port: number;
  let dev: ChildProcess;
  let output = '';
  const served = async () => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/openapi.yaml`);
      return res.ok ? await res.text() : undefined;
    } catch {
      return undefined;
    }
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-dev-'));
    contract = path.join(dir, 'openapi.yaml');
    generated = path.join(dir, 'api.ts');
    fs.copyFileSync(path.join(root, 'openapi/openapi.yaml'), contract);
    consoleContract = path.join(dir, 'console', 'console.yaml');
    consoleGenerated = path.join(dir, 'console.ts');
    fs.mkdirSync(path.dirname(consoleContract));
    fs.copyFileSync(path.join(root, 'openapi/console.yaml'), consoleContract);
    port = await freePort();
    dev = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(root, 'scripts/dev.ts'),
        '--contract',
        contract,
        '--generated',
        generated,
        '--parameters',
        path.join(dir, 'parameters.ts'),
        '--console-contract',
        consoleContract,
        '--console-generated',
        consoleGenerated,
      ],
      {
        cwd: root,
        env: { ...process.env, PORT: String(port), DATA_DIR: path.join(dir, 'data'), LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    dev.stdout!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    dev.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    await until('the first server', served, 60_000);
  });

  after(async () => {
    if (dev.exitCode === null) {
      dev.kill('SIGTERM');
      await new Promise((resolve) => dev.once('exit', resolve));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when the contract changes, then the types are regenerated and the server restarts on it', async () => {
    // A new operation: the running server answers its path 404 (no such route); a server
    // started on the new contract knows it as an operation needing a key (401).
    const status = async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/api/generate/watch-check`)).status;
      } catch {
        return undefined;
      }
    };
    assert.equal(await status(), 404);
    const text = fs.readFileSync(contract, 'utf8');
    const edited = withOperation(text, { path: '/api/generate/watch-check', operationId: 'watchCheck', summary: 'WATCH-MODE MARKER' }).replace(
      /^( {2}title: ).*$/m,
      '$1gemforge watch-mode check',
    );
    assert.notEqual(edited, text);
    fs.writeFileSync(contract, edited);
    await until('the restarted server on the new contract', async () => ((await status()) === 401 ? true : undefined), 60_000);
    assert.match(fs.readFileSync(generated, 'utf8'), /WATCH-MODE MARKER/);
    assert.match(output, /\[dev\] contract linted; regenerated/);
  });

  it('when the contract changes, then the port answers throughout and /openapi.yaml is always the contract of the server answering', async () => {
    fs.writeFileSync(
      contract,
      withOperation(fs.readFileSync(contract, 'utf8'), { path: '/api/generate/watch-check-two', operationId: 'watchCheckTwo', summary: 'SECOND MARKER' }),
    );
    const before = output.length;
    // Each round reads the contract, then calls the new operation: requests go to one server at a
    // time and a switch is for good, so a contract that lists it must come from a server that
    // accepts it (401, not 404 "no such route"). A connection refused or a 503 is a moment of no server.
    let rounds = 0;
    await until(
      'the new operation served and accepted',
      async () => {
        rounds++;
        const yaml = await fetch(`http://127.0.0.1:${port}/openapi.yaml`);
        assert.equal(yaml.status, 200, `round ${rounds}: the contract is served`);
        const listed = (await yaml.text()).includes('SECOND MARKER');
        const status = (await fetch(`http://127.0.0.1:${port}/api/generate/watch-check-two`)).status;
        // (Not listed and yet accepted is fine: the switch came between the two requests.)
        if (listed) assert.equal(status, 401, `round ${rounds}: the served contract lists the operation, so the server answering accepts it`);
        else assert.ok(status === 404 || status === 401, `round ${rounds}: answered ${status}`);
        return listed ? true : undefined;
      },
      60_000,
    );
    assert.ok(rounds > 1, 'the edit was read while the old server still answered');
    await until('the figure', () => (/\[dev\] live: the new server answers \d+\.\d s after the change/.test(output.slice(before)) ? true : undefined), 10_000);
  });

  it('when the contract breaks, then the linter says why and the last good server keeps running', async () => {
    const before = output.length;
    fs.writeFileSync(contract, fs.readFileSync(contract, 'utf8').replace(/^openapi: 3\.1\.0$/m, 'openapi: 3.1.0\nnot-a-field: {'));
    await until('the lint failure', () => (output.slice(before).includes('[dev] the contract does not lint') ? true : undefined), 60_000);
    assert.ok(output.length > before);
    assert.equal(
      (await fetch(`http://127.0.0.1:${port}/api/generate/watch-check`)).status,
      401,
      'the last good server still answers, on the last good contract',
    );
    assert.match(fs.readFileSync(generated, 'utf8'), /WATCH-MODE MARKER/, 'the types were left as they were');
  });

  it("when the console's contract changes while the contract is broken, then its types are regenerated and the last good server keeps running", async () => {
    const before = output.length;
    assert.equal(fs.existsSync(consoleGenerated), false);
    fs.writeFileSync(consoleContract, fs.readFileSync(consoleContract, 'utf8').replace(/^( {2}title: ).*$/m, '$1console watch check'));
    await until(
      'the console types',
      () => (fs.existsSync(consoleGenerated) && fs.readFileSync(consoleGenerated, 'utf8').includes('"/session"') ? true : undefined),
      60_000,
    );
    await until('the note', () => (output.slice(before).includes('[dev] the contract still does not lint') ? true : undefined), 60_000);
    assert.match(output.slice(before), /\[dev\] regenerated .*console\.ts/);
    assert.equal((await fetch(`http://127.0.0.1:${port}/api/generate/watch-check`)).status, 401, 'the last good server still answers');
  });

  it('when dev is stopped, then its server stops too', async () => {
    dev.kill('SIGTERM');
    await new Promise((resolve) => dev.once('exit', resolve));
    await until('the server to stop', async () => ((await served()) === undefined ? true : undefined), 15_000);
  });
});

describe('npm run dev, as a newcomer runs it', () => {
  let dir: string;
  let contract: string;
  let consoleContract: string;
  let port: number;
  let npm: ChildProcess;
  let exited: Promise<unknown>;
  let output = '';
  const served = async () => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/openapi.yaml`);
      return res.ok ? true : undefined;
    } catch {
      return undefined;
    }
  };
  /** No JavaScript stack trace: no `at …` frames, no `file://` source lines, no Node version footer. */
  const assertNoStack = (text: string) => {
    assert.doesNotMatch(text, /^\s+at\s/m, text);
    assert.doesNotMatch(text, /^file:\/\//m, text);
    assert.doesNotMatch(text, /^Node\.js v\d/m, text);
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-npm-dev-'));
    contract = path.join(dir, 'openapi.yaml');
    fs.copyFileSync(path.join(root, 'openapi/openapi.yaml'), contract);
    consoleContract = path.join(dir, 'console', 'console.yaml');
    fs.mkdirSync(path.dirname(consoleContract));
    fs.copyFileSync(path.join(root, 'openapi/console.yaml'), consoleContract);
    port = await freePort();
    const args = [
      '--contract',
      contract,
      '--generated',
      path.join(dir, 'api.ts'),
      '--parameters',
      path.join(dir, 'parameters.ts'),
      '--console-contract',
      consoleContract,
      '--console-generated',
      path.join(dir, 'console.ts'),
    ];
    npm = spawn('npm', ['run', '--silent', 'dev', '--', ...args], {
      cwd: root,
      env: { ...process.env, PORT: String(port), DATA_DIR: path.join(dir, 'data'), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = new Promise((resolve) => npm.once('exit', resolve));
    npm.stdout!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    npm.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')));
    await until('the first server', served, 60_000);
  });

  after(async () => {
    if (npm.exitCode === null && npm.signalCode === null) {
      npm.kill('SIGKILL');
      await exited;
    }
    // Whatever the outcome, no server of this suite is left on its port.
    await until(
      'no server left',
      async () => {
        if ((await served()) === undefined) return true;
        const pid = /"pid":(\d+)/.exec(output)?.[1];
        if (pid) process.kill(Number(pid), 'SIGKILL');
        return undefined;
      },
      15_000,
    ).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("when the console's contract gets a bad $ref, then the linter's message is printed without a stack trace", async () => {
    const before = output.length;
    fs.writeFileSync(
      consoleContract,
      fs.readFileSync(consoleContract, 'utf8').replace(/\$ref: '#\/components\/responses\/SignedIn'/, "$ref: '#/components/responses/SignedInNope'"),
    );
    await until('the lint failure', () => (output.slice(before).includes("[dev] the console's contract does not lint") ? true : undefined), 60_000);
    await until('the whole message', () => (/Validation failed|error/i.test(output.slice(before).split('does not lint')[1] ?? '') ? true : undefined), 10_000);
    const said = output.slice(before);
    assert.match(said, /SignedInNope|Can't resolve \$ref/);
    assertNoStack(said);
    assert.ok(await served(), 'the last good server keeps running');
  });

  it('when the contract gets a bad $ref, then the linter says where without a stack trace', async () => {
    const before = output.length;
    fs.writeFileSync(
      contract,
      fs.readFileSync(contract, 'utf8').replace("$ref: '#/components/responses/Unauthorized'", "$ref: '#/components/responses/Unauthorizd'"),
    );
    await until('the lint failure', () => (output.slice(before).includes('[dev] the contract does not lint') ? true : undefined), 60_000);
    await until('the whole message', () => (/Validation failed/.test(output.slice(before)) ? true : undefined), 10_000);
    const said = output.slice(before);
    assert.match(said, /Can't resolve \$ref/);
    assertNoStack(said);
  });

  it('when npm run dev gets SIGTERM, then npm, dev and its server all stop', async () => {
    npm.kill('SIGTERM');
    await exited;
    await until('the server to stop', async () => ((await served()) === undefined ? true : undefined), 15_000);
  });
});
