/**
 * The account console's sign-in (issue 28): logins of account holders, made by
 * the operator (`gemforge admin console invite|login`), and server-side sessions.
 *
 * - Passwords are argon2id (hash-wasm; OWASP's m=19 MiB, t=2, p=1), never stored plain.
 * - An invite is a one-time token (only its SHA-256 is stored) valid for INVITE_HOURS;
 *   accepting it sets the password and opens a session.
 * - A session's cookie holds a random token; the row's id is its SHA-256, so a
 *   database read yields no usable cookie. A session ends at its absolute expiry,
 *   after `idleSeconds` without a request, or when revoked (sign out, sign out everywhere).
 * - Failed sign-ins are counted per email (known or not) and per client address;
 *   past the limit every attempt answers 429 until the window ends. An unknown
 *   email and a wrong password get the same 401 after the same work.
 */
import crypto from 'node:crypto';
import { argon2id, argon2Verify } from 'hash-wasm';
import type { Db } from '../storage/db.ts';
import * as store from '../storage/console.ts';
import type { LoginRow, SessionRow } from '../storage/console.ts';
import { ApiError } from '../errors.ts';
import { AdminError, requireAccount } from './accounts.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';

export type { LoginRow, SessionRow };

export const INVITE_HOURS = 72;
export const MIN_PASSWORD_CHARS = 12;
export const MAX_PASSWORD_CHARS = 256;
/** Failed sign-ins allowed per window: per email, and per client address. */
export const ATTEMPT_LIMITS = { email: 5, address: 20 } as const;
export const ATTEMPT_WINDOW_SECONDS = 15 * 60;

/** How long sessions live (config: CONSOLE_SESSION_IDLE_SECONDS, CONSOLE_SESSION_MAX_SECONDS). */
export interface SessionSettings {
  idleSeconds: number;
  maxSeconds: number;
}

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest('hex');
const randomToken = () => crypto.randomBytes(32).toString('base64url');
const normalEmail = (email: string) => email.trim().toLowerCase();
const later = (clock: Clock, seconds: number) => new Date(clock.now().getTime() + seconds * 1000).toISOString();

export const signInFailed = () => new ApiError(401, 'SIGN_IN_FAILED', 'The email or password is wrong.');
export const sessionExpired = () => new ApiError(401, 'SESSION_EXPIRED', 'Your session has ended (signed out or expired); sign in again.');

export async function hashPassword(password: string): Promise<string> {
  return argon2id({ password, salt: crypto.randomBytes(16), parallelism: 1, iterations: 2, memorySize: 19_456, hashLength: 32, outputType: 'encoded' });
}

/** Verified against a real hash even when there is no login, so an unknown email costs the same time (made at the first sign-in, not at every import). */
let decoy: Promise<string> | undefined;
const decoyHash = () => (decoy ??= hashPassword(randomToken()));

function checkPassword(password: string): void {
  const chars = Array.from(password).length;
  if (chars < MIN_PASSWORD_CHARS || chars > MAX_PASSWORD_CHARS) {
    throw new AdminError(`the password must be ${MIN_PASSWORD_CHARS} to ${MAX_PASSWORD_CHARS} characters`);
  }
}

function checkEmail(email: string): string {
  const normal = normalEmail(email);
  if (!/^[^\s@]+@[^\s@]+$/.test(normal) || normal.length > 320) throw new AdminError(`"${email}" is not an email address`);
  return normal;
}

/** The login of `email` for `accountId`, made when absent; an email belongs to one account only. */
async function loginFor(db: Db, clock: Clock, accountId: string, email: string): Promise<LoginRow> {
  await requireAccount(db, accountId);
  const normal = checkEmail(email);
  const existing = await store.findLoginByEmail(db, normal);
  if (existing) {
    if (existing.account_id !== accountId) throw new AdminError(`${normal} already signs in to another account`);
    return existing;
  }
  const now = clock.now().toISOString();
  const row: LoginRow = { id: newId('login'), account_id: accountId, email: normal, password_hash: null, invite_token_hash: null, invite_expires_at: null, created_at: now, updated_at: now };
  await store.insertLogin(db, row);
  return row;
}

/** A one-time invite for `email` (made or replaced); returns the token, shown once. */
export async function invite(db: Db, clock: Clock, input: { accountId: string; email: string }): Promise<{ login: LoginRow; token: string; expiresAt: string }> {
  const login = await loginFor(db, clock, input.accountId, input.email);
  const token = randomToken();
  const expiresAt = later(clock, INVITE_HOURS * 3600);
  await store.updateLogin(db, login.id, { invite_token_hash: sha256(token), invite_expires_at: expiresAt, updated_at: clock.now().toISOString() });
  return { login, token, expiresAt };
}

/** Sets a login's password (made when absent); its sessions end, as after any password change. */
export async function setPassword(db: Db, clock: Clock, input: { accountId: string; email: string; password: string }): Promise<LoginRow> {
  checkPassword(input.password);
  const login = await loginFor(db, clock, input.accountId, input.email);
  await store.updateLogin(db, login.id, { password_hash: await hashPassword(input.password), updated_at: clock.now().toISOString() });
  await store.revokeSessions(db, { login_id: login.id }, clock.now().toISOString());
  return login;
}

/** Accepts an invite: the password is set, the token spent, and a session opened. */
export async function acceptInvite(db: Db, clock: Clock, settings: SessionSettings, token: string, password: string): Promise<OpenedSession> {
  const login = await store.findLoginByInvite(db, sha256(token));
  if (!login || !login.invite_expires_at || Date.parse(login.invite_expires_at) <= clock.now().getTime()) {
    throw new ApiError(401, 'INVITE_INVALID', 'This invite link is unknown, already used or expired; ask the operator for a new one.');
  }
  await store.updateLogin(db, login.id, {
    password_hash: await hashPassword(password),
    invite_token_hash: null,
    invite_expires_at: null,
    updated_at: clock.now().toISOString(),
  });
  return openSession(db, clock, settings, login);
}

/** A new session: the cookie's token (never stored) and the row. */
export interface OpenedSession {
  token: string;
  session: SessionRow;
  email: string;
}

async function openSession(db: Db, clock: Clock, settings: SessionSettings, login: LoginRow): Promise<OpenedSession> {
  const token = randomToken();
  const now = clock.now().toISOString();
  const session: SessionRow = {
    id: sha256(token),
    login_id: login.id,
    account_id: login.account_id,
    csrf_token: randomToken(),
    created_at: now,
    last_seen_at: now,
    idle_expires_at: later(clock, settings.idleSeconds),
    expires_at: later(clock, settings.maxSeconds),
    revoked_at: null,
  };
  await store.insertSession(db, session);
  return { token, session, email: login.email };
}

/** Refuses a sign-in while the subject has used up its failures in the current window. */
async function checkAttempts(db: Db, clock: Clock, subject: string, limit: number): Promise<void> {
  const row = await store.findAttempt(db, subject);
  if (!row || row.failures < limit) return;
  const ends = Date.parse(row.window_started_at) + ATTEMPT_WINDOW_SECONDS * 1000;
  if (ends <= clock.now().getTime()) return;
  const minutes = Math.ceil((ends - clock.now().getTime()) / 60_000);
  throw new ApiError(429, 'TOO_MANY_ATTEMPTS', `Too many failed sign-ins; try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`);
}

async function countFailure(db: Db, clock: Clock, subject: string): Promise<void> {
  await store.countAttemptFailure(db, subject, clock.now().toISOString(), later(clock, -ATTEMPT_WINDOW_SECONDS));
}

/** Signs in with an email and password from `address`: a session, or 401 SIGN_IN_FAILED / 429 TOO_MANY_ATTEMPTS. */
export async function signIn(db: Db, clock: Clock, settings: SessionSettings, input: { email: string; password: string; address: string }): Promise<OpenedSession> {
  const email = normalEmail(input.email);
  const subjects = { email: `email:${sha256(email)}`, address: `address:${input.address}` };
  // Old windows and long-ended sessions go as sign-ins come, so neither table grows without end.
  await store.prune(db, later(clock, -Math.max(ATTEMPT_WINDOW_SECONDS, 86_400)));
  await checkAttempts(db, clock, subjects.email, ATTEMPT_LIMITS.email);
  await checkAttempts(db, clock, subjects.address, ATTEMPT_LIMITS.address);
  const login = await store.findLoginByEmail(db, email);
  const hash = login?.password_hash ?? (await decoyHash());
  const ok = (await argon2Verify({ password: input.password, hash })) && Boolean(login?.password_hash);
  if (!ok || !login) {
    await countFailure(db, clock, subjects.email);
    await countFailure(db, clock, subjects.address);
    throw signInFailed();
  }
  await store.clearAttempt(db, subjects.email);
  return openSession(db, clock, settings, login);
}

/** The live session of a cookie token, its idle expiry moved on; 401 SESSION_EXPIRED otherwise. */
export async function resumeSession(db: Db, clock: Clock, settings: SessionSettings, token: string): Promise<SessionRow> {
  const session = await store.findSession(db, sha256(token));
  const now = clock.now();
  if (!session || session.revoked_at || Date.parse(session.expires_at) <= now.getTime() || Date.parse(session.idle_expires_at) <= now.getTime()) {
    throw sessionExpired();
  }
  const idle = later(clock, settings.idleSeconds);
  await store.touchSession(db, session.id, now.toISOString(), idle);
  return { ...session, last_seen_at: now.toISOString(), idle_expires_at: idle };
}

/** The email the session signed in with. */
export async function emailOf(db: Db, session: SessionRow): Promise<string> {
  return (await store.findLogin(db, session.login_id))?.email ?? '';
}

export async function signOut(db: Db, clock: Clock, session: SessionRow): Promise<void> {
  await store.revokeSessions(db, { id: session.id }, clock.now().toISOString());
}

/** Ends every session of the login (this one included); returns how many. */
export async function signOutEverywhere(db: Db, clock: Clock, loginId: string): Promise<number> {
  return store.revokeSessions(db, { login_id: loginId }, clock.now().toISOString());
}

/** The operator's view of a login: never a hash or token. */
export async function describeLogins(db: Db, clock: Clock, accountId?: string) {
  const rows = await store.listLogins(db, accountId);
  const now = clock.now().toISOString();
  return Promise.all(
    rows.map(async (l) => ({
      id: l.id,
      accountId: l.account_id,
      email: l.email,
      hasPassword: l.password_hash !== null,
      invitePendingUntil: l.invite_expires_at,
      liveSessions: await store.countLiveSessions(db, l.id, now),
      createdAt: l.created_at,
    })),
  );
}

/** Ends every session of the login with this email (operator); returns how many. */
export async function revokeSessionsOf(db: Db, clock: Clock, email: string): Promise<number> {
  const login = await store.findLoginByEmail(db, normalEmail(email));
  if (!login) throw new AdminError(`no console login for ${normalEmail(email)}`);
  return signOutEverywhere(db, clock, login.id);
}
