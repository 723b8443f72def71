/** The account console over HTTP: a login made as the operator's CLI makes it, and signed-in calls with the cookie and CSRF token. */
import assert from 'node:assert/strict';
import * as consoleLogins from '../../server/domain/console.ts';
import { systemClock } from '../../server/domain/clock.ts';
import type { TestServer } from './server.ts';

export const PASSWORD = 'correct horse battery staple';

/** A console session: the cookie as a browser would send it back, and the CSRF token. */
export interface ConsoleSession {
  cookie: string;
  csrf: string;
}

let n = 0;
/** An account with Gems and a console login; returns its id and email. */
export async function consoleHolder(s: TestServer, input: { gems?: number; paidConsent?: boolean } = {}): Promise<{ accountId: string; email: string }> {
  const accountId = await s.account({ gems: input.gems ?? 1000, paidConsent: input.paidConsent ?? true });
  const email = `holder-${process.pid}-${n++}@example.com`;
  await consoleLogins.setPassword(s.db, systemClock, { accountId, email, password: PASSWORD });
  return { accountId, email };
}

/** A console API call; `session` sends the cookie and (unless `csrf: false`) the CSRF token; `address` an X-Forwarded-For. */
export function consoleCall(
  s: TestServer,
  method: string,
  path: string,
  init: { session?: ConsoleSession; body?: unknown; csrf?: boolean; address?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (init.session) headers.cookie = init.session.cookie;
  if (init.session && init.csrf !== false) headers['x-csrf-token'] = init.session.csrf;
  if (init.address) headers['x-forwarded-for'] = init.address;
  return s.call(method, `/console/api${path}`, { body: init.body, headers });
}

/** Signs in and returns the session (asserting the 200). */
export async function signIn(s: TestServer, email: string, password = PASSWORD, address?: string): Promise<ConsoleSession> {
  const res = await consoleCall(s, 'POST', '/session', { body: { email, password }, address });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { csrfToken: string };
  return { cookie: sessionCookieOf(res), csrf: body.csrfToken };
}

/** The `name=value` of the session cookie a response set. */
export function sessionCookieOf(res: Response): string {
  const set = res.headers.getSetCookie().find((c) => c.startsWith('gemforge_console='));
  assert.ok(set, 'a session cookie is set');
  return set.split(';')[0]!;
}
