/**
 * Starts the real server on port 0 with a temporary DATA_DIR (tests drive the real thing, not a stand-in)
 * and gives tests what they need to drive it: accounts and keys made through
 * the same domain code the admin CLI uses, and small HTTP helpers. Under
 * TEST_DATABASE_URL the server's database is a fresh Postgres database of its
 * own (helpers/database.ts) instead of SQLite in the data dir.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../server/config.ts';
import { startServer, type RunningServer } from '../../server/server.ts';
import * as accounts from '../../server/domain/accounts.ts';
import * as ledger from '../../server/domain/ledger.ts';
import { systemClock, type Clock } from '../../server/domain/clock.ts';
import type { MediaProviders } from '../../server/providers/media-types.ts';
import { databaseUrlFor, dropDatabaseFor } from './database.ts';

export interface TestServer extends RunningServer {
  dataDir: string;
  config: Config;
  /** Makes an account (with Gems and LLM allowance) and returns its id. */
  account(input?: { gems?: number; llmAllowance?: number; paidConsent?: boolean; state?: 'active' | 'blocked' | 'unavailable' }): Promise<string>;
  /** Makes a key on an account and returns its secret. */
  key(accountId: string, input?: { scopes?: accounts.Scope[]; cap?: number; expiresAt?: Date; name?: string }): Promise<{ id: string; secret: string }>;
  /** An account with a key holding both scopes. */
  user(input?: { gems?: number; llmAllowance?: number; paidConsent?: boolean; cap?: number }): Promise<{ accountId: string; keyId: string; secret: string }>;
  /** fetch against the server with a bearer key. */
  call(method: string, url: string, init?: { key?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
}

/** A fresh, empty data directory under the OS temp dir. */
export function tempDataDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-test-'));
}

export async function startTestServer(
  options: { env?: Record<string, string>; clock?: Clock; config?: Partial<Config>; dataDir?: string; providers?: MediaProviders } = {},
): Promise<TestServer> {
  const dataDir = options.dataDir ?? tempDataDir();
  const databaseUrl = await databaseUrlFor(dataDir);
  const config = loadConfig(
    { LOG_LEVEL: 'silent', ...(databaseUrl && { DATABASE_URL: databaseUrl }), ...options.env, DATA_DIR: dataDir, PORT: '0' },
    options.config,
  );
  const clock = options.clock ?? systemClock;
  const running = await startServer(config, { clock, ...(options.providers && { providers: options.providers }) });
  const { db } = running;

  const server: TestServer = {
    ...running,
    dataDir,
    config,
    async close(closeOptions) {
      await running.close(closeOptions);
      if (options.dataDir) return; // the caller's installation: it may start another server on it
      fs.rmSync(dataDir, { recursive: true, force: true });
      await dropDatabaseFor(dataDir);
    },
    async account(input = {}) {
      const a = await accounts.createAccount(db, clock, { name: 'test', ...input });
      if (input.gems) await ledger.credit(db, clock, a.id, input.gems, 'test grant');
      return a.id;
    },
    async key(accountId, input = {}) {
      const { key, secret } = await accounts.createKey(db, clock, config.keyPrefix, {
        accountId,
        name: input.name ?? 'test key',
        scopes: input.scopes ?? ['read', 'generate'],
        monthlyCap: input.cap,
        expiresAt: input.expiresAt,
      });
      return { id: key.id, secret };
    },
    async user(input = {}) {
      const accountId = await server.account({ gems: 1000, ...input });
      const { id, secret } = await server.key(accountId, { cap: input.cap });
      return { accountId, keyId: id, secret };
    },
    async call(method, url, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      if (init.key) headers.authorization = `Bearer ${init.key}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['content-type'] ??= 'application/json';
      }
      return fetch(new URL(url, running.url), { method, headers, body });
    },
  };
  return server;
}

/** Reads an error response and returns its envelope, asserting nothing else is in it. */
export async function errorOf(res: Response): Promise<{ status: number; code?: string; message: string; keys: string[] }> {
  const body = (await res.json()) as { error: { code?: string; message: string } };
  return { status: res.status, code: body.error?.code, message: body.error?.message, keys: Object.keys(body) };
}

/** Asserts that `res` is the error envelope alone, with `status` and (when given) `code`; returns its message. */
export async function expectError(res: Response, status: number, code: string | undefined): Promise<string> {
  const e = await errorOf(res);
  assert.equal(e.status, status, `expected ${status} ${code}, got ${e.status} ${e.code}: ${e.message}`);
  assert.deepEqual(e.keys, ['error']);
  if (code) assert.equal(e.code, code);
  return e.message;
}
