/**
 * The database lost in the middle of a settlement: the worker has stored the
 * output and is charging for it when the transaction's connection goes. The
 * settlement rolls back whole, the job is handed back with a backoff (no
 * attempt spent, no wait for the lease), and the next attempt only settles:
 * the output delivered once, charged once, generated once, the ledger clean.
 * On SQLite the fault seam makes the statement fail as a failing database file
 * does (SQLITE_IOERR); on Postgres the transaction's own backend is terminated
 * (pg_terminate_backend), a real dropped connection.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { assertSettled, submit, waitForTask } from './helpers/tasks.ts';
import { countingProviders } from './helpers/counting-providers.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import * as ledger from '../server/domain/ledger.ts';
import { verifyLedger } from '../server/domain/ledger-verify.ts';
import { verifyTasks } from '../server/domain/tasks.ts';
import { systemClock } from '../server/domain/clock.ts';
import { findJobByTask } from '../server/storage/jobs.ts';
import { databaseFaults } from '../server/storage/engine/query.ts';
import { storeErrorCounts } from '../server/storage/outages.ts';
import { createWorkerMetrics } from '../server/http/metrics.ts';

// A lease far longer than the test: only a hand-back can bring the job round again in time.
const ENV = { WORKER_POLL_MS: '20', WORKER_RETRY_BACKOFF_MS: '50', WORKER_LEASE_MS: '600000' };

/** Breaks the database once, at the first run of `statement`: its transaction's connection is lost. */
function breakOnceAt(statement: string): { broken: () => boolean } {
  let broken = false;
  databaseFaults.statement = async (name, conn) => {
    if (broken || name !== statement) return;
    broken = true;
    if (TEST_DATABASE_URL) await (conn as Knex.Transaction).raw('select pg_terminate_backend(pg_backend_pid())');
    else throw Object.assign(new Error('SQLITE_IOERR: disk I/O error'), { errno: 10, code: 'SQLITE_IOERR' });
  };
  return { broken: () => broken };
}

describe('outages: the database lost mid-settlement', () => {
  let s: TestServer | undefined;
  afterEach(async () => {
    databaseFaults.statement = undefined;
    await s?.close();
    s = undefined;
  });

  it('when the settlement loses its database connection, then the job is handed back with a backoff and the output is delivered once, charged once and generated once', async () => {
    const counted = countingProviders();
    s = await startTestServer({ env: ENV, providers: counted.providers });
    const user = await s.user({ gems: 500 });
    const before = (await ledger.accountSummary(s.db, systemClock, user.accountId, [])).balance;
    const settlementErrors = () => storeErrorCounts.get('database\treservation-close') ?? 0;
    const errorsBefore = settlementErrors();
    // Closing the reservation is the settlement's own write: the job is already marked finished in the same transaction.
    const fault = breakOnceAt('reservation-close');

    const r = await submit(s, user.secret, '/api/generate/image', {
      model: 'gemforge-image-1',
      prompt: 'a fox settling up',
      parameters: { resolution: '512' },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const task = await waitForTask(s, user.secret, r.body.task.id);

    assert.ok(fault.broken(), 'the settlement met the fault');
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assertSettled(task);
    assert.equal(task.outputs.length, 1);
    assert.equal(counted.calls(), 1, 'the output generated once');
    const job = await findJobByTask(s.db, task.id);
    assert.equal(job?.store_retries, 1, 'handed back once after the failed settlement');
    assert.equal(job?.attempts, 1, 'no attempt spent: the job was not left to lease recovery');
    const assets = await s.db('assets').where({ task_id: task.id }).count<Array<{ n: number | string }>>({ n: '*' });
    assert.equal(Number(assets[0]?.n), 1, 'the output stored once');
    const after = await ledger.accountSummary(s.db, systemClock, user.accountId, []);
    assert.equal(after.balance, before - task.chargedGems, 'charged once');
    assert.equal(after.outstandingReservations.count, 0);
    assert.deepEqual((await verifyLedger(s.db, [verifyTasks])).problems, [], 'ledger verify is clean');
    assert.ok(settlementErrors() > errorsBefore, 'the failure is counted against the database, by the statement that met it');
    assert.match(await createWorkerMetrics().text(), /gemforge_worker_jobs_total\{event="handed back"\} [1-9]/);
  });
});
