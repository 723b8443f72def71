/** A key's last use (domain/accounts.ts KeyUses): stamped at most once a minute per process, never moved back. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KeyUses } from '../../server/domain/accounts.ts';
import { markKeyUsed } from '../../server/storage/accounts.ts';
import { ManualClock, makeAccountWithKey, openTestDb } from '../helpers/db.ts';
import { until } from '../helpers/poll.ts';

const lastUsed = async (db: Awaited<ReturnType<typeof openTestDb>>['db'], id: string) =>
  ((await db('api_keys').where({ id }).first('last_used_at')) as { last_used_at: string | null }).last_used_at;

describe('key uses', () => {
  it('when a key authenticates many times within a minute, then its last use is written once, and again after the minute', async () => {
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-11-25T10:00:00.000Z'));
      const { keyId } = await makeAccountWithKey(t.db, clock);
      const writes: string[] = [];
      const uses = new KeyUses(t.db, clock);
      const onQuery = (q: { sql: string }) => void (/update [`"]api_keys[`"]/i.test(q.sql) && writes.push(q.sql));
      t.db.on('query', onQuery);
      for (let i = 0; i < 50; i++) uses.note(keyId); // whether to write is decided here; the write itself runs in the background
      await until('the last use written', async () => (await lastUsed(t.db, keyId)) === '2026-11-25T10:00:00.000Z', 5000, 10);
      assert.equal(writes.length, 1);
      clock.advance(30_000);
      uses.note(keyId);
      clock.advance(31_000);
      uses.note(keyId);
      await until('the later use written', async () => (await lastUsed(t.db, keyId)) === '2026-11-25T10:01:01.000Z', 5000, 10);
      assert.equal(writes.length, 2);
      t.db.off('query', onQuery);
    } finally {
      await t.close();
    }
  });

  it('when a stamp older than the stored one arrives (another process, late), then the last use does not move back', async () => {
    const t = await openTestDb();
    try {
      const clock = new ManualClock(new Date('2026-11-25T10:00:00.000Z'));
      const { keyId } = await makeAccountWithKey(t.db, clock);
      await markKeyUsed(t.db, keyId, '2026-11-25T10:05:00.000Z');
      await markKeyUsed(t.db, keyId, '2026-11-25T10:04:00.000Z');
      assert.equal(await lastUsed(t.db, keyId), '2026-11-25T10:05:00.000Z');
    } finally {
      await t.close();
    }
  });
});
