/**
 * Accounts and API keys: the use cases behind the admin CLI (the reference
 * server's stand-in for the account settings page) and bearer authentication.
 */
import crypto from 'node:crypto';
import type { Db } from '../storage/db.ts';
import { inTransaction } from '../storage/db.ts';
import * as store from '../storage/accounts.ts';
import type { AccountRow, AccountState, ApiKeyRow } from '../storage/accounts.ts';
import * as balances from '../storage/balances.ts';
import { DomainError, invalidApiKey, invalidInput } from './errors.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';
import { DEFAULT_POLICY_COLUMNS, policyColumns, type PolicyPatch } from './policy/settings.ts';
import { invalidatePrincipals, type PrincipalCache } from './principal-cache.ts';

export type Scope = 'read' | 'generate';
export const MAX_ACTIVE_KEYS = 50;

/** Who is calling: the key and its account, after every access check passed. */
export interface Principal {
  key: ApiKeyRow;
  account: AccountRow;
}

/** Account and key names: what their columns hold (Postgres enforces it; SQLite would not). */
export const MAX_NAME_CHARS = 200;

function checkName(name: string, what: string): void {
  if (Array.from(name).length > MAX_NAME_CHARS) throw invalidInput(`${what} name must be at most ${MAX_NAME_CHARS} characters`);
}

/** The stored form of a key's secret: its SHA-256 in hex (one-shot `crypto.hash`: half a `createHash` object's cost, once per request). */
export function hashSecret(secret: string): string {
  return crypto.hash('sha256', secret, 'hex');
}

export interface NewAccount {
  name: string;
  llmAllowance?: number | undefined;
  paidConsent?: boolean | undefined;
  state?: AccountState | undefined;
}

export async function createAccount(db: Db, clock: Clock, input: NewAccount): Promise<AccountRow> {
  checkName(input.name, 'an account');
  const now = clock.now().toISOString();
  const row: AccountRow = {
    id: newId('acct'),
    name: input.name,
    state: input.state ?? 'active',
    llm_allowance: input.llmAllowance ?? 0,
    paid_consent: input.paidConsent ?? false,
    ...DEFAULT_POLICY_COLUMNS,
    created_at: now,
    updated_at: now,
  };
  await store.insertAccount(db, row);
  return row;
}

export async function requireAccount(db: Db, id: string): Promise<AccountRow> {
  const account = await store.findAccount(db, id);
  if (!account) throw invalidInput(`no account with id ${id}`);
  return account;
}

/** Account settings to change; the policy settings (domain/policy/settings.ts) among them. */
export interface AccountPatch extends PolicyPatch {
  llmAllowance?: number | undefined;
  paidConsent?: boolean | undefined;
  state?: AccountState | undefined;
  /** Fair share caps of this account (null: back to the configured default). */
  localConcurrency?: number | null | undefined;
  remoteConcurrency?: number | null | undefined;
  queuedTasks?: number | null | undefined;
}

export async function updateAccount(db: Db, clock: Clock, id: string, patch: AccountPatch): Promise<AccountRow> {
  await requireAccount(db, id);
  await store.updateAccount(db, id, {
    ...(patch.llmAllowance !== undefined && { llm_allowance: patch.llmAllowance }),
    ...(patch.paidConsent !== undefined && { paid_consent: patch.paidConsent }),
    // An operator's state replaces a block moderation set (see `admin moderation clear`).
    ...(patch.state !== undefined && { state: patch.state, moderation_blocked_at: null }),
    ...(patch.localConcurrency !== undefined && { local_concurrency: patch.localConcurrency }),
    ...(patch.remoteConcurrency !== undefined && { remote_concurrency: patch.remoteConcurrency }),
    ...(patch.queuedTasks !== undefined && { queued_tasks: patch.queuedTasks }),
    ...policyColumns(patch),
    updated_at: clock.now().toISOString(),
  });
  invalidatePrincipals();
  return requireAccount(db, id);
}

export interface NewKey {
  accountId: string;
  name: string;
  scopes: Scope[];
  monthlyCap?: number | undefined;
  expiresAt?: Date | undefined;
}

/** Creates a key and returns its secret, which is never stored or shown again. */
export async function createKey(db: Db, clock: Clock, prefix: string, input: NewKey): Promise<{ key: ApiKeyRow; secret: string }> {
  checkName(input.name, 'a key');
  if (input.scopes.length === 0) throw invalidInput('a key needs at least one scope (read, generate)');
  if (input.expiresAt && input.expiresAt.getTime() <= clock.now().getTime()) {
    throw invalidInput('the expiry must be in the future');
  }
  const secret = `${prefix}_${crypto.randomBytes(32).toString('hex')}`;
  const key: ApiKeyRow = {
    id: newId('key'),
    account_id: input.accountId,
    name: input.name,
    secret_hash: hashSecret(secret),
    secret_hint: secret.slice(-4),
    scope_read: input.scopes.includes('read'),
    scope_generate: input.scopes.includes('generate'),
    monthly_cap: input.monthlyCap ?? null,
    expires_at: input.expiresAt ? input.expiresAt.toISOString() : null,
    revoked_at: null,
    created_at: clock.now().toISOString(),
  };
  await inTransaction(db, async (trx) => {
    await store.lockAccountRow(trx, input.accountId); // count and insert as one step
    if (!(await store.findAccount(trx, input.accountId))) throw invalidInput(`no account with id ${input.accountId}`);
    const active = await store.countActiveKeys(trx, input.accountId);
    if (active >= MAX_ACTIVE_KEYS) {
      throw new DomainError('KEY_LIMIT', `account ${input.accountId} already has ${MAX_ACTIVE_KEYS} non-revoked keys; revoke one first`);
    }
    await store.insertKey(trx, key);
    await balances.createKeyRow(trx, key.id);
  });
  return { key, secret };
}

/** A change of a key's settings (spec: a name, an optional future expiry, a monthly cap); null clears the expiry or the cap. */
export interface KeyPatch {
  name?: string | undefined;
  expiresAt?: Date | null | undefined;
  monthlyCap?: number | null | undefined;
}

/**
 * Changes a key's name, expiry or cap (what the patch leaves out stays). A
 * revoked key stays as it was revoked; a new expiry must be in the future. The
 * cap applies from the next reservation: a cap below this month's spend refuses
 * new spending and takes back nothing already held or charged.
 */
export async function updateKey(db: Db, clock: Clock, id: string, patch: KeyPatch): Promise<ApiKeyRow> {
  if (patch.name !== undefined) checkName(patch.name, 'a key');
  if (patch.expiresAt && patch.expiresAt.getTime() <= clock.now().getTime()) throw invalidInput('the expiry must be in the future');
  const key = await store.findKey(db, id);
  if (!key) throw invalidInput(`no key with id ${id}`);
  const changed = await store.updateKeySettings(db, id, {
    name: patch.name ?? key.name,
    monthly_cap: patch.monthlyCap === undefined ? key.monthly_cap : patch.monthlyCap,
    expires_at: patch.expiresAt === undefined ? key.expires_at : patch.expiresAt && patch.expiresAt.toISOString(),
  });
  if (!changed) throw invalidInput(`key ${key.name} is revoked and cannot be changed`);
  invalidatePrincipals(); // a lower cap or a nearer expiry applies to the very next request
  return (await store.findKey(db, id))!;
}

export async function revokeKey(db: Db, clock: Clock, id: string): Promise<ApiKeyRow> {
  const key = await store.findKey(db, id);
  if (!key) throw invalidInput(`no key with id ${id}`);
  await store.revokeKey(db, id, clock.now().toISOString());
  invalidatePrincipals();
  return (await store.findKey(db, id))!;
}

export async function listKeys(db: Db, accountId: string): Promise<ApiKeyRow[]> {
  await requireAccount(db, accountId);
  return store.listKeys(db, accountId);
}

/** The public view of a key: never the secret or its hash. */
export function describeKey(key: ApiKeyRow) {
  return {
    id: key.id,
    accountId: key.account_id,
    name: key.name,
    scopes: [key.scope_read && 'read', key.scope_generate && 'generate'].filter(Boolean),
    monthlyCap: key.monthly_cap,
    expiresAt: key.expires_at,
    revokedAt: key.revoked_at,
    createdAt: key.created_at,
    lastUsedAt: key.last_used_at ?? null,
    hint: `…${key.secret_hint}`,
  };
}

/** How often one process stamps one key's last use: the console shows it to within this. */
const KEY_USE_INTERVAL_MS = 60_000;
/** Keys remembered per process before the memory starts again (a stamp may then come early: harmless). */
const KEY_USE_MEMORY = 10_000;

/**
 * Notes that keys authenticated requests (the console's "last used"): a key's
 * stamp is written at most once a minute per process, in the background, so the
 * request path only looks up a map. A write that fails is reported to `onError`
 * and costs nothing else: the next use a minute later writes again.
 */
export class KeyUses {
  private readonly written = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  note(keyId: string, onError: (error: unknown) => void = () => undefined): void {
    const now = this.clock.now();
    const last = this.written.get(keyId);
    if (last !== undefined && now.getTime() - last < KEY_USE_INTERVAL_MS) return;
    if (this.written.size >= KEY_USE_MEMORY) this.written.clear();
    this.written.set(keyId, now.getTime());
    store.markKeyUsed(this.db, keyId, now.toISOString()).catch(onError);
  }
}

const KEY_SHAPE = /^[a-z]+_[0-9a-f]{64}$/;

/**
 * Resolves a bearer secret to a principal, or throws the spec's error:
 * 401 INVALID_API_KEY (missing, malformed, unknown, expired, revoked),
 * 403 ACCOUNT_BLOCKED / ACCOUNT_UNAVAILABLE, 403 INSUFFICIENT_SCOPE.
 * The key and its account are one statement, or none within the cache's
 * one-second rule (principal-cache.ts); every check runs on every request.
 */
export async function authenticate(
  db: Db,
  clock: Clock,
  prefix: string,
  secret: string | undefined,
  scope: Scope | undefined,
  cache?: PrincipalCache,
): Promise<Principal> {
  if (!secret || !KEY_SHAPE.test(secret) || !secret.startsWith(`${prefix}_`)) throw invalidApiKey();
  const hash = hashSecret(secret);
  const read = () => store.findKeyWithAccount(db, hash);
  const found = cache ? await cache.lookup(hash, read) : await read();
  if (!found) throw invalidApiKey();
  const refused = accessRefusal(found, clock);
  if (refused) throw refused;
  const { key, account } = found;
  if (scope === 'read' && !key.scope_read) throw insufficientScope('read');
  if (scope === 'generate' && !key.scope_generate) throw insufficientScope('generate');
  return { key, account };
}

/**
 * Why a key and its account may no longer be used (revoked, expired, account
 * blocked or unavailable), or undefined. Checked on every request, and over
 * the life of a stream (key-watch.ts).
 */
export function accessRefusal({ key, account }: { key: ApiKeyRow; account: AccountRow }, clock: Clock): DomainError | undefined {
  if (key.revoked_at) return invalidApiKey();
  if (key.expires_at && Date.parse(key.expires_at) <= clock.now().getTime()) return invalidApiKey();
  if (account.state === 'blocked') return new DomainError('ACCOUNT_BLOCKED', 'This account is blocked.');
  if (account.state === 'unavailable') return new DomainError('ACCOUNT_UNAVAILABLE', 'This account is not available: its setup is unfinished.');
  return undefined;
}

function insufficientScope(scope: Scope): DomainError {
  return new DomainError('INSUFFICIENT_SCOPE', `This API key lacks the "${scope}" scope needed for this operation.`);
}
