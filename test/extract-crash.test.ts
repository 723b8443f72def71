/**
 * A server killed (SIGKILL) between the claim of an extraction and its outcome
 * (the analysis held by `[[scenario:processing:N]]`): after a restart on the same
 * data, the identity answers REQUEST_UNCERTAIN (never a new dispatch), the
 * reservation stays held, and the ledger verifies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { openDb } from '../server/storage/db.ts';
import { dbOptionsFor } from './helpers/database.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { childServers, generateKeyOnDisk } from './helpers/child.ts';
import { video } from './helpers/media.ts';
import { until } from './helpers/poll.ts';

const PATH = '/api/generate/extract/video';

describe('video analysis across a crash', () => {
  const { dataDir, start: startChild } = childServers();

  it('when the server is SIGKILLed during an analysis and restarted, then a replay is 409 REQUEST_UNCERTAIN and the ledger verifies with the reservation held', async () => {
    const secret = await generateKeyOnDisk(dataDir, 1000);
    const auth = { authorization: `Bearer ${secret}` };

    const first = await startChild();
    const upload = await fetch(`${first.url}/api/generate/assets`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'video/mp4' },
      body: new Uint8Array(fs.readFileSync(await video('mp4'))),
    });
    assert.equal(upload.status, 201);
    const { asset } = (await upload.json()) as { asset: { id: string } };

    const init = {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'crash-extract-1' },
      body: JSON.stringify({ model: 'gemforge-video-analysis-1', videoAssetId: asset.id, prompt: 'slowly [[scenario:processing:30]]' }),
    };
    const pending = fetch(`${first.url}${PATH}`, init).catch((error: unknown) => error);

    // Kill once the claim is durable: the identity is pending with its reservation.
    const watch = await openDb(await dbOptionsFor(dataDir));
    try {
      await until(
        'the extraction claimed',
        async () => (await watch('idempotency_records').where({ idem_key: 'crash-extract-1' }).first())?.state === 'pending',
        10_000,
      );
    } finally {
      await watch.destroy();
    }
    assert.equal(await first.kill('SIGKILL'), 'SIGKILL');
    assert.ok((await pending) instanceof Error, 'the request got no answer');

    const second = await startChild();
    for (let i = 0; i < 2; i++) {
      const replay = await fetch(`${second.url}${PATH}`, init);
      assert.equal(replay.status, 409);
      const envelope = (await replay.json()) as { error: { code: string; message: string } };
      assert.equal(envelope.error.code, 'REQUEST_UNCERTAIN');
    }
    await second.kill('SIGTERM');

    const check = await openDb(await dbOptionsFor(dataDir));
    try {
      const report = await verifyLedger(check);
      assert.deepEqual(report.problems, []);
      const record = await check('idempotency_records').where({ idem_key: 'crash-extract-1' }).first();
      assert.equal(record.state, 'pending');
      const reservation = await check('reservations').where({ id: record.reservation_id }).first();
      assert.equal(reservation.state, 'held');
      assert.equal(reservation.released, 0);
    } finally {
      await check.destroy();
    }
  });
});
