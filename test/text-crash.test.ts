/**
 * A server killed (SIGKILL) in the middle of a streamed completion: after a
 * restart on the same data, the identity answers REQUEST_UNCERTAIN (never a new
 * dispatch), the reservation stays held, and the ledger verifies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { openDb } from '../server/storage/db.ts';
import { dbOptionsFor } from './helpers/database.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { childServers, generateKeyOnDisk } from './helpers/child.ts';
import { sseEvents } from './helpers/sse.ts';

const PATH = '/api/generate/text/v1/chat/completions';

describe('text generation across a crash', () => {
  const { dataDir, start: startChild } = childServers();

  it('when the server is SIGKILLed mid-stream and restarted, then a replay is 409 REQUEST_UNCERTAIN and the ledger verifies with the reservation held', async () => {
    const secret = await generateKeyOnDisk(dataDir, 100);

    const env = { TEXT_STREAM_DELAY_MS: '200' };
    const first = await startChild(env);
    const body = { model: 'gemforge-text-1', messages: [{ role: 'user', content: 'A slow answer, please.' }], stream: true };
    const init = {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': 'crash-1' },
      body: JSON.stringify(body),
    };
    const controller = new AbortController();
    const res = await fetch(`${first.url}${PATH}`, { ...init, signal: controller.signal });
    assert.equal(res.status, 200);
    const events = sseEvents(res);
    const chunk = JSON.parse((await events.next()).value as string) as { id: string };
    assert.match(chunk.id, /^chatcmpl_/);

    assert.equal(await first.kill('SIGKILL'), 'SIGKILL');
    controller.abort();
    await events.return(undefined).catch(() => undefined);

    const second = await startChild(env);
    for (let i = 0; i < 2; i++) {
      const replay = await fetch(`${second.url}${PATH}`, init);
      assert.equal(replay.status, 409);
      const envelope = (await replay.json()) as { error: { code: string; message: string } };
      assert.equal(envelope.error.code, 'REQUEST_UNCERTAIN');
      assert.match(envelope.error.message, /will not be dispatched again/);
    }
    await second.kill('SIGTERM');

    const check = await openDb(await dbOptionsFor(dataDir));
    try {
      const report = await verifyLedger(check);
      assert.deepEqual(report.problems, []);
      assert.equal(report.ok, true);
      const rows = await check('reservations').where({ ref: chunk.id });
      assert.equal(rows.length, 1);
      assert.equal(rows[0].state, 'held');
      const record = await check('idempotency_records').where({ idem_key: 'crash-1' }).first();
      assert.equal(record.state, 'pending');
    } finally {
      await check.destroy();
    }
  });
});

describe('text generation across a graceful shutdown', () => {
  const { dataDir, start: startChild } = childServers();

  it('when SIGTERM comes mid-stream, then the listening stream still ends with [DONE], an abandoned one still settles, and the server exits 0', async () => {
    const secret = await generateKeyOnDisk(dataDir, 100);
    const server = await startChild({ TEXT_STREAM_DELAY_MS: '50', SHUTDOWN_GRACE_SECONDS: '600' });
    const start = (idemKey: string, signal?: AbortSignal) =>
      fetch(`${server.url}${PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': idemKey },
        body: JSON.stringify({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'A slow answer, please.' }], stream: true }),
        signal,
      });
    const listening = sseEvents(await start('drain-listening'));
    await listening.next();
    const controller = new AbortController();
    const abandoned = sseEvents(await start('drain-abandoned', controller.signal));
    await abandoned.next();
    controller.abort();
    await abandoned.return(undefined).catch(() => undefined);

    const sent = Date.now();
    const exited = server.kill('SIGTERM');
    const rest: string[] = [];
    for await (const data of listening) rest.push(data);
    assert.equal(rest.at(-1), '[DONE]', 'the stream finished during the grace period');
    assert.equal(await exited, 0);
    // A grace period of 10 minutes, the bound half of it: far above a loaded runner's exit, far below the end of the grace.
    if (Date.now() - sent >= 300_000) console.log(JSON.stringify(server.logs.slice(-12), null, 1));
    assert.ok(Date.now() - sent < 300_000, 'the server left as soon as its work was done, not at the end of the grace period');

    const check = await openDb(await dbOptionsFor(dataDir));
    try {
      const records = await check('idempotency_records').whereIn('idem_key', ['drain-listening', 'drain-abandoned']).select('idem_key', 'state');
      assert.deepEqual(
        records.map((r: { state: string }) => r.state),
        ['completed', 'completed'],
      );
      assert.equal((await check('reservations').where({ state: 'held' })).length, 0, 'both reservations settled');
      assert.deepEqual((await verifyLedger(check)).problems, []);
    } finally {
      await check.destroy();
    }
  });
});
