/**
 * Telling a store's failure from a failure of the work (storage/outages.ts):
 * what the worker retries later and what fails an output slot at once.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkTempSpace } from '../../server/storage/blobs.ts';
import { isDatabaseFailure, isDiskFailure, storeErrorCounts, storeFailed, StoreUnavailableError } from '../../server/storage/outages.ts';

const coded = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('outages: store failures', () => {
  it('when the database is unreachable, refuses work or its disk fails, then it is a database failure; a wrong statement is not', () => {
    for (const error of [
      Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' }),
      coded('ECONNREFUSED'),
      coded('57P01', 'terminating connection due to administrator command'),
      coded('08006', 'connection failure'),
      coded('53300', 'too many connections'),
      coded('SQLITE_BUSY'),
      coded('SQLITE_FULL'),
      new Error('Connection terminated unexpectedly'),
    ]) {
      assert.equal(isDatabaseFailure(error), true, String(error));
    }
    for (const error of [
      coded('23505', 'duplicate key'),
      coded('42P01', 'relation does not exist'),
      coded('SQLITE_CONSTRAINT'),
      new Error('not a sha256'),
      undefined,
    ]) {
      assert.equal(isDatabaseFailure(error), false, String(error));
    }
  });

  it('when the disk is full, read-only or failing, then it is a disk failure; a missing file is not', () => {
    for (const code of ['ENOSPC', 'EDQUOT', 'EIO', 'EROFS']) assert.equal(isDiskFailure(coded(code)), true, code);
    for (const code of ['ENOENT', 'EISDIR']) assert.equal(isDiskFailure(coded(code)), false, code);
  });

  it('when a failure passes up through several layers, then it is counted once, under the store and operation where it happened', () => {
    const error = coded('ENOSPC');
    const before = storeErrorCounts.get('local disk\tunit') ?? 0;
    const wrapped = storeFailed('local disk', 'unit', error);
    assert.ok(wrapped instanceof StoreUnavailableError);
    assert.equal(wrapped.store, 'local disk');
    assert.equal(storeFailed('object store', 'other', wrapped), wrapped, 'an already wrapped failure passes as it is');
    storeFailed('local disk', 'unit', error);
    assert.equal(storeErrorCounts.get('local disk\tunit'), before + 1);
  });
});

describe('outages: the temp directory readiness asks about', () => {
  it('when the temp file system has less free space than asked, then the check throws and names the figures; with room it passes', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gemforge-space-'));
    try {
      const stat = await fs.statfs(dataDir);
      const free = stat.bavail * stat.bsize;
      await checkTempSpace(dataDir, 0);
      // A threshold just above what the disk has must fail: the check reads the real file system.
      await assert.rejects(checkTempSpace(dataDir, free + 1024 ** 4), /bytes free, under/);
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
