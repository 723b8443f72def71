/**
 * Statements about the database itself rather than its rows: the readiness
 * check, an online backup, a transaction's isolation. Each runs through knex as
 * it is (`statement.dynamic`): none is a statement Postgres can prepare, and
 * the readiness check must go where every other write goes (the pool's writer).
 */
import fs from 'node:fs';
import type { Db, Tx } from './db.ts';
import { isSqlite } from './db.ts';
import { query, statement } from './engine/query.ts';

const ping = statement.dynamic('ping', (c) => c.raw('select 1'));

/** Throws unless the database answers a statement. */
export async function databaseAnswers(db: Db): Promise<void> {
  await query(db, ping);
}

const vacuumInto = statement.dynamic('vacuum-into', (c, target) => c.raw('VACUUM INTO ?', [target!]));

/** SQLite: one consistent copy of the database at `target`, taken online (VACUUM INTO reads a snapshot while writers go on, WAL). */
export async function copySqliteTo(db: Db, target: string): Promise<void> {
  // A backup is the whole database: private to this user (VACUUM INTO fills an empty file it finds).
  fs.closeSync(fs.openSync(target, 'wx', 0o600));
  await query(db, vacuumInto, [target]);
}

const repeatableRead = statement.dynamic('read-only-snapshot', (c) => c.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY'));

/**
 * Makes `trx` read one snapshot, read-only: REPEATABLE READ on Postgres (its
 * first statement); on SQLite (WAL) a transaction's reads already see one.
 */
export async function readOneSnapshot(trx: Tx): Promise<void> {
  if (!isSqlite(trx)) await query(trx, repeatableRead);
}
