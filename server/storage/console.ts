/** Console logins, sessions, sign-in attempts (migration 013) and the networks each login signed in from (015). Plain rows in, plain rows out. */
import type { Db } from './db.ts';
import { columnsOf, insertRow, query, rowOf, rowParams, statement, type Conn } from './engine/query.ts';

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
  await query(
    db,
    statement.write(`console-login-update:${columns}`, (c, i, ...v) => c('console_logins').where({ id: i }).update(rowOf(columns, v))),
    [id, ...rowParams(columns, patch)],
  );
}

const logins = statement.rows<LoginRow>('console-logins', (c) => c('console_logins').orderBy('created_at'));
const loginsOf = statement.rows<LoginRow>('console-logins-of-account', (c, account) =>
  c('console_logins').orderBy('created_at').where({ account_id: account }),
);

export async function listLogins(db: Db, accountId?: string): Promise<LoginRow[]> {
  return accountId === undefined ? query(db, logins) : query(db, loginsOf, [accountId]);
}

export async function insertSession(db: Conn, row: SessionRow): Promise<void> {
  await insertRow(db, 'console_sessions', row);
}

const sessionById = statement.first<SessionRow>('console-session-by-id', (c, id) => c('console_sessions').where({ id }).first());

export async function findSession(db: Db, id: string): Promise<SessionRow | undefined> {
  return query(db, sessionById, [id]);
}

const sessionTouch = statement.write('console-session-touch', (c, id, seen, idle) =>
  c('console_sessions').where({ id }).update({ last_seen_at: seen, idle_expires_at: idle }),
);

export async function touchSession(db: Db, id: string, lastSeenAt: string, idleExpiresAt: string): Promise<void> {
  await query(db, sessionTouch, [id, lastSeenAt, idleExpiresAt]);
}

const sessionRevoke = statement.write('console-session-revoke', (c, id, at) =>
  c('console_sessions').where({ id }).whereNull('revoked_at').update({ revoked_at: at }),
);
const loginSessionsRevoke = statement.write('console-login-sessions-revoke', (c, login, at) =>
  c('console_sessions').where({ login_id: login }).whereNull('revoked_at').update({ revoked_at: at }),
);

/** Revokes one session, or every live session of a login; returns how many. */
export async function revokeSessions(db: Conn, where: { id: string } | { login_id: string }, at: string): Promise<number> {
  const { changes } = 'id' in where ? await query(db, sessionRevoke, [where.id, at]) : await query(db, loginSessionsRevoke, [where.login_id, at]);
  return changes;
}

const liveSessions = statement.first<{ n: number | string }>('console-live-sessions-count', (c, login, now) =>
  c('console_sessions')
    .where({ login_id: login })
    .whereNull('revoked_at')
    .where('expires_at', '>', now)
    .where('idle_expires_at', '>', now)
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
 * Reserves one failure of `subject` before its password is checked, in one
 * statement, so concurrent attempts cannot all pass a check made before any of
 * them counted: the count goes up only while it is under `limit` (or its window,
 * started at or before `staleBefore`, starts again at `at`). Returns the window
 * the reservation is in, or undefined when the limit is used up.
 */
export async function reserveAttempt(conn: Conn, subject: string, limit: number, at: string, staleBefore: string): Promise<string | undefined> {
  const { rows } = await query(conn, attemptReserve, [subject, at, staleBefore, staleBefore, at, staleBefore, limit]);
  return rows[0]?.window_started_at;
}

const STALE = 'console_attempts.window_started_at <= ?';
const attemptReserve = statement.write<{ window_started_at: string }>('console-attempt-reserve', (c, subject, at, stale1, stale2, at2, stale3, limit) =>
  c('console_attempts')
    .insert({ subject, failures: 1, window_started_at: at })
    .onConflict('subject')
    .merge({
      failures: c.raw(`CASE WHEN ${STALE} THEN 1 ELSE console_attempts.failures + 1 END`, [stale1]),
      window_started_at: c.raw(`CASE WHEN ${STALE} THEN ? ELSE console_attempts.window_started_at END`, [stale2, at2]),
    })
    .where(c.raw(`${STALE} OR console_attempts.failures < ?`, [stale3, limit]))
    .returning(['window_started_at']),
);

/** Gives back a reservation made in the window that started at `windowStartedAt` (a later window owes it nothing). */
export async function releaseAttempt(db: Db, subject: string, windowStartedAt: string): Promise<void> {
  await query(db, attemptRelease, [subject, windowStartedAt]);
}

const attemptRelease = statement.write('console-attempt-release', (c, subject, window) =>
  c('console_attempts').where({ subject, window_started_at: window }).where('failures', '>', 0).decrement('failures', 1),
);

const knownAddress = statement.first<{ login_id: string }>('console-known-address', (c, login, network, since) =>
  c('console_known_addresses').where({ login_id: login, network }).where('signed_in_at', '>=', since).first('login_id'),
);

/** Whether the login signed in successfully from `network` at or after `since`. */
export async function isKnownAddress(db: Db, loginId: string, network: string, since: string): Promise<boolean> {
  return (await query(db, knownAddress, [loginId, network, since])) !== undefined;
}

const addressRemember = statement.write('console-known-address-remember', (c, login, network, at) =>
  c('console_known_addresses').insert({ login_id: login, network, signed_in_at: at }).onConflict(['login_id', 'network']).merge(['signed_in_at']),
);

/** Records a successful sign-in of the login from `network`. */
export async function rememberAddress(db: Db, loginId: string, network: string, at: string): Promise<void> {
  await query(db, addressRemember, [loginId, network, at]);
}

const inviteConsume = statement.write('console-invite-consume', (c, id, tokenHash, now, passwordHash) =>
  c('console_logins')
    .where({ id, invite_token_hash: tokenHash })
    .where('invite_expires_at', '>', now)
    .update({ password_hash: passwordHash, invite_token_hash: null, invite_expires_at: null, updated_at: now }),
);

/**
 * Spends a login's invite and sets its password in one statement: of concurrent
 * accepts of one token, exactly one changes the row (true); the others, and an
 * expired invite, change nothing (false).
 */
export async function consumeInvite(conn: Conn, loginId: string, tokenHash: string, now: string, passwordHash: string): Promise<boolean> {
  return (await query(conn, inviteConsume, [loginId, tokenHash, now, passwordHash])).changes === 1;
}

const attemptsPrune = statement.write('console-attempts-prune', (c, before) => c('console_attempts').where('window_started_at', '<', before).delete());
const sessionsPrune = statement.write('console-sessions-prune', (c, before) => c('console_sessions').where('expires_at', '<', before).delete());
const knownPrune = statement.write('console-known-addresses-prune', (c, before) => c('console_known_addresses').where('signed_in_at', '<', before).delete());

/** Deletes attempt windows that started before `before`, sessions that ended before `before`, and networks last signed in from before `knownBefore`. */
export async function prune(db: Db, before: string, knownBefore: string): Promise<void> {
  await query(db, attemptsPrune, [before]);
  await query(db, sessionsPrune, [before]);
  await query(db, knownPrune, [knownBefore]);
}
