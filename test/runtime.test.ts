/**
 * The supported runtime: the project brings Node 24 itself (the npm
 * package `node`, first on the PATH of npm scripts and npx), and the native
 * modules load and work under it: sqlite3 runs SQL, sharp encodes and decodes.
 * Every command line that starts the server carries its V8 flags
 * (server/node-flags.ts), and they take effect.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import sharp from 'sharp';
import { spawnSync } from 'node:child_process';
import { SERVER_NODE_FLAGS } from '../server/node-flags.ts';

const root = path.resolve(import.meta.dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  engines: { node: string };
  dependencies: Record<string, string>;
  scripts: Record<string, string>;
};

/** [major, minor] of a version such as `v24.21.0` or `>=24.11`. */
const majorMinor = (v: string) => (/(\d+)\.(\d+)/.exec(v) ?? []).slice(1, 3).map(Number);

describe('runtime', () => {
  it('when tests run through npm, then they run on the Node the project pins, which meets engines', () => {
    const [major, minor] = majorMinor(process.version);
    const [needMajor, needMinor] = majorMinor(pkg.engines.node);
    assert.ok(major > needMajor || (major === needMajor && minor >= needMinor), `${process.version} does not meet engines ${pkg.engines.node}`);
    assert.equal(process.version, `v${pkg.dependencies.node}`, 'the npm package "node" runs the tests');
    assert.equal(fs.realpathSync(process.execPath), fs.realpathSync(path.join(root, 'node_modules/node/bin/node')));
  });

  it('when sqlite3 is loaded under this Node, then it runs SQL in WAL mode on a file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-runtime-'));
    try {
      const db = await new Promise<sqlite3.Database>((resolve, reject) => {
        const d = new sqlite3.Database(path.join(dir, 'x.sqlite'), (e) => (e ? reject(e) : resolve(d)));
      });
      const get = (sql: string) =>
        new Promise<Record<string, unknown>>((resolve, reject) =>
          db.get(sql, (e: Error | null, row: Record<string, unknown>) => (e ? reject(e) : resolve(row))),
        );
      assert.equal((await get('PRAGMA journal_mode = WAL')).journal_mode, 'wal');
      assert.match(String((await get('SELECT sqlite_version() AS v')).v), /^3\.\d+/);
      assert.equal((await get('SELECT 6 * 7 AS n')).n, 42);
      await new Promise<void>((resolve, reject) => db.close((e) => (e ? reject(e) : resolve())));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when sharp is loaded under this Node, then it encodes a PNG and reads it back', async () => {
    const png = await sharp({ create: { width: 3, height: 2, channels: 3, background: { r: 255, g: 0, b: 0 } } })
      .png()
      .toBuffer();
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    assert.equal(info.width, 3);
    assert.equal(info.height, 2);
    assert.deepEqual([...data.subarray(0, 3)], [255, 0, 0]);
  });

  it("when npm start (the compiled server) or the multi-instance demo starts the server, then its Node gets the server's V8 flags", () => {
    const flags = SERVER_NODE_FLAGS.join(' ');
    assert.equal(pkg.scripts.start, `node scripts/build.mjs --if-stale && exec node ${flags} dist/server.mjs`);
    const demo = fs.readFileSync(path.join(root, 'scripts/demo-multi.sh'), 'utf8');
    assert.match(demo, new RegExp(`"\\$NODE" ${flags} --import tsx server/main\\.ts`));
  });

  it("when Node runs with the server's V8 flags, then the young generation stays within two 16 MiB semi-spaces", () => {
    // Allocates ~200 MB of short-lived objects with a survivor set, which grows the young generation to its limit.
    const code = `let keep = []; for (let i = 0; i < 3e6; i++) { keep.push({ i }); if (keep.length > 1e6) keep = []; }
      const space = require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      console.log(space.space_size);`;
    const run = spawnSync(process.execPath, [...SERVER_NODE_FLAGS, '-e', code], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.ok(Number(run.stdout) <= 32 * 1024 * 1024, `new space ${run.stdout.trim()} bytes`);
  });
});
