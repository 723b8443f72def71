/**
 * Temp files a killed process left in DATA_DIR/tmp are removed
 * (several processes may share DATA_DIR): the worker sweeps files older than six hours at start and hourly;
 * younger ones, possibly in use by a live process on the same DATA_DIR, stay.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startTestServer, tempDataDir } from './helpers/server.ts';
import { until } from './helpers/poll.ts';
import { STALE_TEMP_MS } from '../server/storage/blobs.ts';

describe('temp files left behind', () => {
  it('when the worker starts, then temp files older than six hours are removed and younger ones kept', async () => {
    const dir = tempDataDir();
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(path.join(tmp, 'multipart'), { recursive: true });
    const old = [path.join(tmp, 'dead-upload'), path.join(tmp, 'multipart', 'dead-voice')];
    const fresh = path.join(tmp, 'in-use');
    for (const f of [...old, fresh]) fs.writeFileSync(f, 'x');
    const past = new Date(Date.now() - STALE_TEMP_MS - 60_000);
    for (const f of old) fs.utimesSync(f, past, past);
    const s = await startTestServer({ dataDir: dir });
    try {
      await until('the stale temp files removed', () => !old.some((f) => fs.existsSync(f)), 10_000);
      assert.ok(fs.existsSync(fresh), 'a young temp file may belong to a live process: kept');
    } finally {
      await s.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
