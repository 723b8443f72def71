/** Console logins, sessions and sign-in attempts (migration 013). Plain rows in, plain rows out. */
import type { Db } from './db.ts';

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
  await db('console_logins').insert(row);
}

export async function findLogin(db: Db, id: string): Promise<LoginRow | undefined> {
  return db('console_logins').where({ id }).first();
}

export async function findLoginByEmail(db: Db, email: string): Promise<LoginRow | undefined> {
  return db('console_logins').where({ email }).first();
}

export async function findLoginByInvite(db: Db, tokenHash: string): Promise<LoginRow | undefined> {
  return db('console_logins').where({ invite_token_hash: tokenHash }).first();
}

export async function updateLogin(db: Db, id: string, patch: Partial<Omit<LoginRow, 'id' | 'account_id' | 'created_at'>>): Promise<void> {
  await db('console_logins').where({ id }).update(patch);
}

export async function listLogins(db: Db, accountId?: string): Promise<LoginRow[]> {
  const q = db('console_logins').orderBy('created_at');
  return accountId === undefined ? q : q.where({ account_id: accountId });
}

export async function insertSession(db: Db, row: SessionRow): Promise<void> {
  await db('console_sessions').insert(row);
}

export async function findSession(db: Db, id: string): Promise<SessionRow | undefined> {
  return db('console_sessions').where({ id }).first();
}

export async function touchSession(db: Db, id: string, lastSeenAt: string, idleExpiresAt: string): Promise<void> {
  await db('console_sessions').where({ id }).update({ last_seen_at: lastSeenAt, idle_expires_at: idleExpiresAt });
}

/** Revokes one session, or every live session of a login; returns how many. */
export async function revokeSessions(db: Db, where: { id: string } | { login_id: string }, at: string): Promise<number> {
  return db('console_sessions').where(where).whereNull('revoked_at').update({ revoked_at: at });
}

export async function countLiveSessions(db: Db, loginId: string, now: string): Promise<number> {
  const row = await db('console_sessions')
    .where({ login_id: loginId })
    .whereNull('revoked_at')
    .where('expires_at', '>', now)
    .where('idle_expires_at', '>', now)
    .count({ n: '*' })
    .first();
  return Number(row?.n ?? 0);
}

export async function findAttempt(db: Db, subject: string): Promise<AttemptRow | undefined> {
  const row = await db('console_attempts').where({ subject }).first();
  return row ? { ...row, failures: Number(row.failures) } : undefined;
}

/**
 * Counts one failure of `subject` in one statement (concurrent failures all
 * count): a window that started at or before `staleBefore` starts again at `at`.
 */
export async function countAttemptFailure(db: Db, subject: string, at: string, staleBefore: string): Promise<void> {
  const stale = 'console_attempts.window_started_at <= ?';
  await db('console_attempts')
    .insert({ subject, failures: 1, window_started_at: at })
    .onConflict('subject')
    .merge({
      failures: db.raw(`CASE WHEN ${stale} THEN 1 ELSE console_attempts.failures + 1 END`, [staleBefore]),
      window_started_at: db.raw(`CASE WHEN ${stale} THEN ? ELSE console_attempts.window_started_at END`, [staleBefore, at]),
    });
}

export async function clearAttempt(db: Db, subject: string): Promise<void> {
  await db('console_attempts').where({ subject }).delete();
}

/** Deletes attempt windows that started before `before`, and sessions that ended before `before`. */
export async function prune(db: Db, before: string): Promise<void> {
  await db('console_attempts').where('window_started_at', '<', before).delete();
  await db('console_sessions').where('expires_at', '<', before).delete();
}
