/**
 * The account console's sign-in: logins of account holders, made by
 * the operator (`gemforge admin console invite|login`), and server-side sessions.
 *
 * - Passwords are argon2id (hash-wasm; OWASP's m=19 MiB, t=2, p=1), never stored plain,
 *   hashed and checked on worker threads (password-pool.ts), never on the event loop.
 * - An invite is a one-time token (only its SHA-256 is stored) valid for INVITE_HOURS;
 *   accepting it spends the token, sets the password and ends every earlier session in
 *   one transaction (of concurrent accepts exactly one wins), and opens a session.
 * - A session's cookie holds a random token; the row's id is its SHA-256, so a
 *   database read yields no usable cookie. A session ends at its absolute expiry,
 *   after `idleSeconds` without a request, or when revoked (sign out, sign out everywhere).
 * - Sign-in limits (docs/console.md): an attempt reserves a failure before its
 *   password is checked, in one statement per counter, and a success gives the
 *   reservation back; so concurrent attempts cannot pass a limit together. From a
 *   network the login signed in from before (an IPv4 address, an IPv6 /64) the
 *   attempt counts against that pair alone; from elsewhere, against the email (known
 *   or not) and the network. Failures from strangers therefore never lock a holder
 *   out of the networks they use. Past a limit the answer is 429 until the window
 *   ends. An unknown email and a wrong password get the same 401 after the same work.
 */
import crypto from 'node:crypto';
import { inTransaction, type Db } from '../storage/db.ts';
import type { Conn } from '../storage/engine/query.ts';
import * as store from '../storage/console.ts';
import type { LoginRow, SessionRow } from '../storage/console.ts';
import { DomainError, invalidInput } from './errors.ts';
import { requireAccount } from './accounts.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';
import { inlineHasher, type PasswordHasher } from './password-pool.ts';
import { parseAddress, prefixKey } from '../addresses.ts';

export type { LoginRow, SessionRow };

export const INVITE_HOURS = 72;
export const MIN_PASSWORD_CHARS = 12;
export const MAX_PASSWORD_CHARS = 256;
/**
 * Failed sign-ins allowed per window: per email and per client network, for
 * attempts from a network the login has not signed in from; per login and
 * network, for attempts from one it has.
 */
export const ATTEMPT_LIMITS = { email: 5, address: 20, knownAddress: 5 } as const;
export const ATTEMPT_WINDOW_SECONDS = 15 * 60;
/** How long a network a login signed in from stays known after its last successful sign-in. */
export const KNOWN_ADDRESS_DAYS = 90;

/** How long sessions live (config: CONSOLE_SESSION_IDLE_SECONDS, CONSOLE_SESSION_MAX_SECONDS). */
export interface SessionSettings {
  idleSeconds: number;
  maxSeconds: number;
}

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest('hex');
const randomToken = () => crypto.randomBytes(32).toString('base64url');
const normalEmail = (email: string) => email.trim().toLowerCase();
const later = (clock: Clock, seconds: number) => new Date(clock.now().getTime() + seconds * 1000).toISOString();

export const signInFailed = () => new DomainError('SIGN_IN_FAILED', 'The email or password is wrong.');
export const sessionExpired = () => new DomainError('SESSION_EXPIRED', 'Your session has ended (signed out or expired); sign in again.');

const inviteInvalid = () => new DomainError('INVITE_INVALID', 'This invite link is unknown, already used or expired; ask the operator for a new one.');

/**
 * Verified against when there is no login, so an unknown email costs the same
 * work as a wrong password: a real argon2id hash with the same parameters, of a
 * random password nobody kept (and a match would not sign in: there is no login).
 */
const DECOY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$lfAoRxFf5eWYaZyaOQLCgg$mBIk1ZfEZ09RIMR2SH4LAfzn/CC65edG6UAxXB/ZXgQ';

/** The operator's password rule; the console's contract says the same for invites (openapi/console.yaml, acceptInvite). */
function checkPassword(password: string): void {
  const chars = Array.from(password).length;
  if (chars < MIN_PASSWORD_CHARS || chars > MAX_PASSWORD_CHARS) {
    throw invalidInput(`the password must be ${MIN_PASSWORD_CHARS} to ${MAX_PASSWORD_CHARS} characters`);
  }
  if (!/\S/.test(password)) throw invalidInput('the password must not be only spaces');
}

/**
 * The network a client address is counted by: an IPv4 address itself, an IPv6
 * address its /64 (one subscriber's usual allocation, within which privacy
 * addresses rotate freely); IPv4-mapped IPv6 counts as its IPv4 address.
 */
export function networkOf(address: string): string {
  const parsed = parseAddress(address);
  if (!parsed) return `raw:${address.slice(0, 64)}`;
  return prefixKey(parsed, parsed.kind() === 'ipv4' ? 32 : 64);
}

function checkEmail(email: string): string {
  const normal = normalEmail(email);
  if (!/^[^\s@]+@[^\s@]+$/.test(normal) || normal.length > 320) throw invalidInput(`"${email}" is not an email address`);
  return normal;
}

/** The login of `email` for `accountId`, made when absent; an email belongs to one account only. */
async function loginFor(db: Db, clock: Clock, accountId: string, email: string): Promise<LoginRow> {
  await requireAccount(db, accountId);
  const normal = checkEmail(email);
  const existing = await store.findLoginByEmail(db, normal);
  if (existing) {
    if (existing.account_id !== accountId) throw invalidInput(`${normal} already signs in to another account`);
    return existing;
  }
  const now = clock.now().toISOString();
  const row: LoginRow = {
    id: newId('login'),
    account_id: accountId,
    email: normal,
    password_hash: null,
    invite_token_hash: null,
    invite_expires_at: null,
    created_at: now,
    updated_at: now,
  };
  await store.insertLogin(db, row);
  return row;
}

/** A one-time invite for `email` (made or replaced); returns the token, shown once. */
export async function invite(
  db: Db,
  clock: Clock,
  input: { accountId: string; email: string },
): Promise<{ login: LoginRow; token: string; expiresAt: string }> {
  const login = await loginFor(db, clock, input.accountId, input.email);
  const token = randomToken();
  const expiresAt = later(clock, INVITE_HOURS * 3600);
  await store.updateLogin(db, login.id, { invite_token_hash: sha256(token), invite_expires_at: expiresAt, updated_at: clock.now().toISOString() });
  return { login, token, expiresAt };
}

/** Sets a login's password (made when absent); its sessions end, as after any password change. */
export async function setPassword(
  db: Db,
  clock: Clock,
  input: { accountId: string; email: string; password: string },
  passwords: PasswordHasher = inlineHasher,
): Promise<LoginRow> {
  checkPassword(input.password);
  const login = await loginFor(db, clock, input.accountId, input.email);
  await store.updateLogin(db, login.id, { password_hash: await passwords.hash(input.password), updated_at: clock.now().toISOString() });
  await store.revokeSessions(db, { login_id: login.id }, clock.now().toISOString());
  return login;
}

/**
 * Accepts an invite from `address`: the token is spent and the password set in
 * one statement (of concurrent accepts exactly one wins; the others get 401
 * INVITE_INVALID, as for a used invite), every earlier session of the login
 * ends (a new password ends them, as `setPassword` does), and a session opens.
 */
export async function acceptInvite(
  db: Db,
  clock: Clock,
  settings: SessionSettings,
  passwords: PasswordHasher,
  input: { token: string; password: string; address: string },
): Promise<OpenedSession> {
  const tokenHash = sha256(input.token);
  const login = await store.findLoginByInvite(db, tokenHash);
  if (!login || !login.invite_expires_at || Date.parse(login.invite_expires_at) <= clock.now().getTime()) throw inviteInvalid();
  // Hashed before the token is spent: a refusal here (a full hashing queue) leaves the invite usable.
  const passwordHash = await passwords.hash(input.password);
  const now = clock.now().toISOString();
  const opened = await inTransaction(db, async (trx) => {
    if (!(await store.consumeInvite(trx, login.id, tokenHash, now, passwordHash))) throw inviteInvalid();
    await store.revokeSessions(trx, { login_id: login.id }, now);
    return openSession(trx, clock, settings, login);
  });
  await store.rememberAddress(db, login.id, networkOf(input.address), now);
  return opened;
}

/** A new session: the cookie's token (never stored) and the row. */
export interface OpenedSession {
  token: string;
  session: SessionRow;
  email: string;
}

async function openSession(db: Conn, clock: Clock, settings: SessionSettings, login: LoginRow): Promise<OpenedSession> {
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

/** A failure counter and its limit. */
interface Counter {
  subject: string;
  limit: number;
}

/** A failure reserved on a counter, in the window that started at `window`. */
interface Reservation {
  subject: string;
  window: string;
}

/** Thrown inside the reservation's transaction to roll back what it reserved. */
class LimitReached extends Error {
  constructor(readonly subject: string) {
    super(subject);
  }
}

/** 429 TOO_MANY_ATTEMPTS, saying when the subject's window ends. */
async function tooManyAttempts(db: Db, clock: Clock, subject: string): Promise<DomainError> {
  const row = await store.findAttempt(db, subject);
  const ends = row ? Date.parse(row.window_started_at) + ATTEMPT_WINDOW_SECONDS * 1000 : clock.now().getTime();
  const minutes = Math.max(1, Math.ceil((ends - clock.now().getTime()) / 60_000));
  return new DomainError('TOO_MANY_ATTEMPTS', `Too many failed sign-ins; try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`);
}

/**
 * Reserves one failure on every counter, all or none (one transaction; each
 * reservation is one statement that refuses at the limit), before the password
 * is checked: 429 when a counter is used up. The reservations stand as the
 * failures of a wrong password; `giveBack` returns them after a right one.
 */
async function reserveAttempts(db: Db, clock: Clock, counters: Counter[]): Promise<Reservation[]> {
  const at = clock.now().toISOString();
  const staleBefore = later(clock, -ATTEMPT_WINDOW_SECONDS);
  try {
    return await inTransaction(db, async (trx) => {
      const reserved: Reservation[] = [];
      for (const { subject, limit } of counters) {
        const window = await store.reserveAttempt(trx, subject, limit, at, staleBefore);
        if (window === undefined) throw new LimitReached(subject);
        reserved.push({ subject, window });
      }
      return reserved;
    });
  } catch (error) {
    if (error instanceof LimitReached) throw await tooManyAttempts(db, clock, error.subject);
    throw error;
  }
}

async function giveBack(db: Db, reserved: Reservation[]): Promise<void> {
  for (const { subject, window } of reserved) await store.releaseAttempt(db, subject, window);
}

/** The counters an attempt on `email` from `network` reserves on: its known pair's, or the email's and the network's. */
function countersOf(email: string, network: string, knownLogin: string | undefined): Counter[] {
  if (knownLogin) return [{ subject: `known:${knownLogin}:${network}`, limit: ATTEMPT_LIMITS.knownAddress }];
  return [
    { subject: `email:${sha256(email)}`, limit: ATTEMPT_LIMITS.email },
    { subject: `address:${network}`, limit: ATTEMPT_LIMITS.address },
  ];
}

/** Signs in with an email and password from `address`: a session, or 401 SIGN_IN_FAILED / 429 TOO_MANY_ATTEMPTS. */
export async function signIn(
  db: Db,
  clock: Clock,
  settings: SessionSettings,
  passwords: PasswordHasher,
  input: { email: string; password: string; address: string },
): Promise<OpenedSession> {
  const email = normalEmail(input.email);
  const network = networkOf(input.address);
  // Old windows, long-ended sessions and networks not used for long go as sign-ins come, so no table grows without end.
  await store.prune(db, later(clock, -Math.max(ATTEMPT_WINDOW_SECONDS, 86_400)), later(clock, -KNOWN_ADDRESS_DAYS * 86_400));
  const login = await store.findLoginByEmail(db, email);
  // Asked for an unknown email too (of no login), so both take the same steps.
  const known = await store.isKnownAddress(db, login?.id ?? '', network, later(clock, -KNOWN_ADDRESS_DAYS * 86_400));
  const reserved = await reserveAttempts(db, clock, countersOf(email, network, known ? login?.id : undefined));
  let ok: boolean;
  try {
    ok = (await passwords.verify(input.password, login?.password_hash ?? DECOY_HASH)) && Boolean(login?.password_hash);
  } catch (error) {
    await giveBack(db, reserved); // the password was never checked (a full hashing queue): no failure
    throw error;
  }
  if (!ok || !login) throw signInFailed();
  await giveBack(db, reserved);
  await store.rememberAddress(db, login.id, network, clock.now().toISOString());
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
  if (!login) throw invalidInput(`no console login for ${normalEmail(email)}`);
  return signOutEverywhere(db, clock, login.id);
}
