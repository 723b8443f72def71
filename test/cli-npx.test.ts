/**
 * `npx gemforge …` inside the repository runs the CLI straight from
 * node_modules/.bin (linked by `npm run prepare`, which npm ci runs), not through
 * npx's self-install of the project: that path read the whole installed tree
 * (seconds per command) and checked the root's `engines` against the Node running npm
 * (EBADENGINE warnings on Node 20). Checked in a scratch copy of the project's
 * package.json, with its own npm cache, so the repository's node_modules is not touched.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run } from './helpers/run.ts';
import CLIENT_PACKAGE from '../client/package.json' with { type: 'json' };
import ROOT_PACKAGE from '../package.json' with { type: 'json' };

const ROOT = path.resolve(import.meta.dirname, '..');

describe('npx gemforge in the repository', () => {
  let project: string;
  let env: NodeJS.ProcessEnv;
  before(async () => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-npx-'));
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(project, 'package.json'));
    fs.mkdirSync(path.join(project, 'scripts'));
    // The link script finds the project from its own place, so it is copied; the CLI is the repository's.
    fs.copyFileSync(path.join(ROOT, 'scripts/link-cli.mjs'), path.join(project, 'scripts/link-cli.mjs'));
    fs.symlinkSync(path.join(ROOT, 'scripts/gemforge.mjs'), path.join(project, 'scripts/gemforge.mjs'));
    env = {
      PATH: process.env.PATH ?? '',
      HOME: project,
      npm_config_cache: path.join(project, '.npm'),
      npm_config_offline: 'true',
      npm_config_update_notifier: 'false',
    };
    // prepare also builds dist/ (scripts/build.mjs), which needs the whole tree: the copy runs its link step.
    assert.match(ROOT_PACKAGE.scripts.prepare, /node scripts\/link-cli\.mjs/);
    const prepare = await run('node', ['scripts/link-cli.mjs'], { cwd: project, env });
    assert.equal(prepare.code, 0, prepare.stderr);
  });
  after(() => fs.rmSync(project, { recursive: true, force: true }));

  it('when npx gemforge --version runs, then the linked bin answers, with no npm warning and nothing installed into the npx cache', async () => {
    const version = await run('npx', ['gemforge', '--version'], { cwd: project, env });
    assert.equal(version.code, 0, version.stderr);
    assert.equal(version.stdout.trim(), CLIENT_PACKAGE.version);
    assert.doesNotMatch(version.stderr, /npm warn|EBADENGINE/);
    assert.equal(fs.existsSync(path.join(project, '.npm/_npx')), false, 'npx did not install the project into its cache');
  });

  it('when the link is made again, then it is replaced, not refused', async () => {
    const again = await run('node', ['scripts/link-cli.mjs'], { cwd: project, env });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(fs.readlinkSync(path.join(project, 'node_modules/.bin/gemforge')), path.join('..', '..', 'scripts', 'gemforge.mjs'));
  });
});
