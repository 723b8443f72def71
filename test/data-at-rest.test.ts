/**
 * Data at rest is private to the server's user: the server child creates
 * DATA_DIR 0700, and the database, its WAL, blobs, outputs, temp files and
 * `admin backup` files are 0600 (directories 0700); a DATA_DIR that already
 * lets others in is reported at start.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { seedUserOnDisk, startServerChild, type ServerChild } from './helpers/child.ts';
import { admin } from './helpers/admin.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { until } from './helpers/poll.ts';

const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-at-rest-'));
const children: ServerChild[] = [];
after(async () => {
  for (const c of children) await c.kill('SIGKILL');
  fs.rmSync(parent, { recursive: true, force: true });
});

/** Every path under `dir` whose mode lets users other than the owner in. */
function openToOthers(dir: string): string[] {
  const open: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const mode = fs.lstatSync(full).mode & 0o777;
    if (mode & 0o077) open.push(`${path.relative(dir, full)} ${mode.toString(8)}`);
  }
  return open;
}

describe('data at rest', () => {
  it('when the server creates DATA_DIR and stores uploads and outputs, then the directory, the database, blobs and backups are readable by its user only', async () => {
    const dataDir = path.join(parent, 'fresh');
    const server = await startServerChild({ DATA_DIR: dataDir });
    children.push(server);
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o700);
    const { secret } = await seedUserOnDisk(dataDir, 500);
    const auth = { authorization: `Bearer ${secret}` };

    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3a6' } })
      .png()
      .toBuffer();
    const uploaded = await fetch(new URL('/api/generate/assets', server.url), { method: 'POST', headers: { ...auth, 'content-type': 'image/png' }, body: png });
    assert.equal(uploaded.status, 201, await uploaded.clone().text());
    const submitted = await fetch(new URL('/api/generate/image', server.url), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `at-rest-${process.pid}` },
      body: JSON.stringify({ model: 'gemforge-image-1', prompt: 'a lighthouse at dawn', parameters: { resolution: '512' } }),
    });
    assert.equal(submitted.status, 202, await submitted.clone().text());
    const { id } = ((await submitted.json()) as { task: { id: string } }).task;
    await until(
      'the image task succeeds',
      async () => {
        const { task } = (await (await fetch(new URL(`/api/generate/tasks/${id}`, server.url), { headers: auth })).json()) as { task: { status: string } };
        if (task.status === 'failed') assert.fail(JSON.stringify(task));
        return task.status === 'succeeded';
      },
      60_000,
    );

    const backupDir = path.join(parent, 'backups');
    if (!TEST_DATABASE_URL) {
      const backup = await admin(dataDir, 'backup', path.join(backupDir, 'copy.sqlite'));
      assert.equal(backup.code, 0, backup.stderr);
      assert.equal(fs.statSync(path.join(backupDir, 'copy.sqlite')).mode & 0o777, 0o600);
      assert.ok(fs.existsSync(path.join(dataDir, 'gemforge.sqlite-wal')), 'the WAL exists (and is checked below)');
    }
    const files = fs.readdirSync(dataDir, { recursive: true }).length;
    assert.ok(files > 3, `the data dir holds the database and blobs (${files} entries)`);
    assert.deepEqual(openToOthers(dataDir), []);
  });

  it('when DATA_DIR already exists and lets other users in, then the server starts and warns, naming the mode', async () => {
    const dataDir = path.join(parent, 'wide');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    const server = await startServerChild({ DATA_DIR: dataDir });
    children.push(server);
    const warning = server.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('DATA_DIR lets other users in'));
    assert.ok(warning, 'a start-up warning');
    assert.equal(warning.mode, '0755');
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o755, 'an operator’s directory keeps its mode');
    assert.deepEqual(openToOthers(dataDir), [], 'what the server wrote inside is private');
  });
});
