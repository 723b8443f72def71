/** Console logins, sessions and sign-in attempts (migration 013). Plain rows in, plain rows out. */
import type { Db } from './db.ts';
import { columnsOf, insertRow, query, rowOf, rowParams, statement } from './query.ts';

export interface LoginRow {
  id: string;
  account_id: string;
  email: string;
  password_hash: string | null;
  invite_token_hash: string | null;
  invite_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface SessionRow {
  id: string;
  login_id: string;
  account_id: string;
  csrf_token: string;
  created_at: string;
  last_seen_at: string;
  idle_expires_at: string;
  expires_at: string;
  revoked_at: string | null;
}

export interface AttemptRow {
  subject: string;
  failures: number;
  window_started_at: string;
}

export async function insertLogin(db: Db, row: LoginRow): Promise<void> {
  await insertRow(db, 'console_logins', row);
}

const loginById = statement.first<LoginRow>('console-login-by-id', (c, id) => c('console_logins').where({ id }).first());
const loginByEmail = statement.first<LoginRow>('console-login-by-email', (c, email) => c('console_logins').where({ email }).first());
const loginByInvite = statement.first<LoginRow>('console-login-by-invite', (c, hash) => c('console_logins').where({ invite_token_hash: hash }).first());

export async function findLogin(db: Db, id: string): Promise<LoginRow | undefined> {
  return query(db, loginById, [id]);
}

export async function findLoginByEmail(db: Db, email: string): Promise<LoginRow | undefined> {
  return query(db, loginByEmail, [email]);
}

export async function findLoginByInvite(db: Db, tokenHash: string): Promise<LoginRow | undefined> {
  return query(db, loginByInvite, [tokenHash]);
}

export async function updateLogin(db: Db, id: string, patch: Partial<Omit<LoginRow, 'id' | 'account_id' | 'created_at'>>): Promise<void> {
  const columns = columnsOf(patch);
  await query(db, statement.write(`console-login-update:${columns}`, (c, i, ...v) => c('console_logins').where({ id: i }).update(rowOf(columns, v))), [id, ...rowParams(columns, patch)]);
}

const logins = statement.rows<LoginRow>('console-logins', (c) => c('console_logins').orderBy('created_at'));
const loginsOf = statement.rows<LoginRow>('console-logins-of-account', (c, account) => c('console_logins').orderBy('created_at').where({ account_id: account }));

export async function listLogins(db: Db, accountId?: string): Promise<LoginRow[]> {
  return accountId === undefined ? query(db, logins) : query(db, loginsOf, [accountId]);
}

export async function insertSession(db: Db, row: SessionRow): Promise<void> {
  await insertRow(db, 'console_sessions', row);
}

const sessionById = statement.first<SessionRow>('console-session-by-id', (c, id) => c('console_sessions').where({ id }).first());

export async function findSession(db: Db, id: string): Promise<SessionRow | undefined> {
  return query(db, sessionById, [id]);
}

const sessionTouch = statement.write('console-session-touch', (c, id, seen, idle) => c('console_sessions').where({ id }).update({ last_seen_at: seen, idle_expires_at: idle }));

export async function touchSession(db: Db, id: string, lastSeenAt: string, idleExpiresAt: string): Promise<void> {
  await query(db, sessionTouch, [id, lastSeenAt, idleExpiresAt]);
}

const sessionRevoke = statement.write('console-session-revoke', (c, id, at) => c('console_sessions').where({ id }).whereNull('revoked_at').update({ revoked_at: at }));
const loginSessionsRevoke = statement.write('console-login-sessions-revoke', (c, login, at) =>
  c('console_sessions').where({ login_id: login }).whereNull('revoked_at').update({ revoked_at: at }),
);

/** Revokes one session, or every live session of a login; returns how many. */
export async function revokeSessions(db: Db, where: { id: string } | { login_id: string }, at: string): Promise<number> {
  const { changes } = 'id' in where ? await query(db, sessionRevoke, [where.id, at]) : await query(db, loginSessionsRevoke, [where.login_id, at]);
  return changes;
}

const liveSessions = statement.first<{ n: number | string }>('console-live-sessions-count', (c, login, now) =>
  c('console_sessions')
    .where({ login_id: login })
    .whereNull('revoked_at')
    .where('expires_at', '>', now!)
    .where('idle_expires_at', '>', now!)
    .count({ n: '*' })
    .first(),
);

export async function countLiveSessions(db: Db, loginId: string, now: string): Promise<number> {
  const row = await query(db, liveSessions, [loginId, now]);
  return Number(row?.n ?? 0);
}

const attemptOf = statement.first<AttemptRow>('console-attempt', (c, subject) => c('console_attempts').where({ subject }).first());

export async function findAttempt(db: Db, subject: string): Promise<AttemptRow | undefined> {
  const row = await query(db, attemptOf, [subject]);
  return row ? { ...row, failures: Number(row.failures) } : undefined;
}

/**
 * Counts one failure of `subject` in one statement (concurrent failures all
 * count): a window that started at or before `staleBefore` starts again at `at`.
 */
export async function countAttemptFailure(db: Db, subject: string, at: string, staleBefore: string): Promise<void> {
  await query(db, attemptFailure, [subject, at, staleBefore]);
}

const STALE = 'console_attempts.window_started_at <= ?';
const attemptFailure = statement.write('console-attempt-failure', (c, subject, at, staleBefore) =>
  c('console_attempts')
    .insert({ subject, failures: 1, window_started_at: at })
    .onConflict('subject')
    .merge({
      failures: c.raw(`CASE WHEN ${STALE} THEN 1 ELSE console_attempts.failures + 1 END`, [staleBefore]),
      window_started_at: c.raw(`CASE WHEN ${STALE} THEN ? ELSE console_attempts.window_started_at END`, [staleBefore, at]),
    }),
);

const attemptClear = statement.write('console-attempt-clear', (c, subject) => c('console_attempts').where({ subject }).delete());

export async function clearAttempt(db: Db, subject: string): Promise<void> {
  await query(db, attemptClear, [subject]);
}

const attemptsPrune = statement.write('console-attempts-prune', (c, before) => c('console_attempts').where('window_started_at', '<', before!).delete());
const sessionsPrune = statement.write('console-sessions-prune', (c, before) => c('console_sessions').where('expires_at', '<', before!).delete());

/** Deletes attempt windows that started before `before`, and sessions that ended before `before`. */
export async function prune(db: Db, before: string): Promise<void> {
  await query(db, attemptsPrune, [before]);
  await query(db, sessionsPrune, [before]);
}
