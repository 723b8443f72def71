/**
 * The account console's JSON API (openapi/console.yaml): sign in and
 * out, the account's keys, its balance and settings (paid-Gem consent, content
 * preference, moderation refusals), its recent tasks and text and extraction charges,
 * and its usage (Gems per day and kind, each key's spend against its cap). HTTP ↔ domain only;
 * the session and CSRF checks ran before (http/console-session.ts).
 */
import { Router, type Request, type Response } from 'express';
import type { operations } from '../../generated/console.ts';
import type { AppDeps } from '../deps.ts';
import * as accounts from '../domain/accounts.ts';
import * as consoleAuth from '../domain/console.ts';
import { accountOverview, accountUsage, listLlmCharges, listOwnVoices, listUploadedAssets } from '../domain/account-view.ts';
import * as moderation from '../domain/policy/moderation.ts';
import { notFound } from '../domain/errors.ts';
import { SESSION_COOKIE, sessionOf } from '../http/console-session.ts';
import { baseUrlFor } from '../http/base-url.ts';
import { listOwnedTasks } from '../domain/task-view.ts';

type Json<Op extends keyof operations, Status extends number> = operations[Op] extends {
  responses: { [S in Status]: { content: { 'application/json': infer Body } } };
}
  ? Body
  : never;
type Body<Op extends keyof operations> = operations[Op] extends { requestBody: { content: { 'application/json': infer B } } } ? B : never;
type KeyView = Json<'listKeys', 200>['keys'][number];

/** Moderation refusals shown on the account, newest first. */
const MODERATION_SHOWN = 20;

/** Sets the session cookie: HttpOnly, SameSite=Strict, only under /console, Secure over TLS. */
function setCookie(req: Request, res: Response, opened: consoleAuth.OpenedSession, maxSeconds: number): void {
  res.cookie(SESSION_COOKIE, opened.token, { httpOnly: true, sameSite: 'strict', path: '/console', secure: req.secure, maxAge: maxSeconds * 1000 });
}

function clearCookie(req: Request, res: Response): void {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/console', secure: req.secure });
}

function signedIn(opened: consoleAuth.OpenedSession): Json<'signIn', 200> {
  return { accountId: opened.session.account_id, email: opened.email, csrfToken: opened.session.csrf_token, expiresAt: opened.session.expires_at };
}

/** Rows on a page of activity when the page does not say. */
const ROWS_PER_PAGE = 20;

/** The page a list request asks for (its `cursor` and `limit`, both checked by the contract). */
function pageAsked(req: Request): { cursor: string | undefined; limit: number } {
  const query = req.query as operations['listTasks']['parameters']['query'] & {};
  return { cursor: query.cursor, limit: query.limit === undefined ? ROWS_PER_PAGE : Number(query.limit) };
}

export function consoleRouter({ db, clock, config, signer, passwords }: Pick<AppDeps, 'db' | 'clock' | 'config' | 'signer' | 'passwords'>): Router {
  const router = Router();
  const settings = config.consoleSession;
  const baseUrl = baseUrlFor(config);

  async function keyViews(accountId: string): Promise<KeyView[]> {
    return (await accountOverview(db, clock, accountId)).keys.map(view);
  }
  const view = ({ accountId: _account, ...key }: ReturnType<typeof accounts.describeKey> & { spendThisMonth: number }): KeyView => ({
    ...key,
    scopes: key.scopes as KeyView['scopes'],
  });

  async function accountView(req: Request): Promise<Json<'getAccount', 200>> {
    const session = sessionOf(req);
    const { account, summary, fields } = await accountOverview(db, clock, session.account_id);
    const refusals = await moderation.listRecords(db, { accountId: account.id, limit: MODERATION_SHOWN });
    return {
      ...fields,
      email: await consoleAuth.emailOf(db, session),
      contentPreference: account.content_preference as Json<'getAccount', 200>['contentPreference'],
      outstandingReservations: { count: summary.outstandingReservations.count, gems: summary.outstandingReservations.gems },
      moderation: {
        blockedAt: account.moderation_blocked_at,
        refusals: refusals.map(({ operation, field, categories, createdAt }) => ({ operation, field, categories, createdAt })),
      },
      csrfToken: session.csrf_token,
    };
  }

  router.post('/console/api/session', async (req, res) => {
    const body = req.body as Body<'signIn'>;
    const opened = await consoleAuth.signIn(db, clock, settings, passwords, { ...body, address: req.ip ?? '' });
    setCookie(req, res, opened, settings.maxSeconds);
    res.status(200).json(signedIn(opened));
  });

  router.post('/console/api/invites/accept', async (req, res) => {
    const body = req.body as Body<'acceptInvite'>;
    const opened = await consoleAuth.acceptInvite(db, clock, settings, passwords, { ...body, address: req.ip ?? '' });
    setCookie(req, res, opened, settings.maxSeconds);
    res.status(200).json(signedIn(opened));
  });

  router.delete('/console/api/session', async (req, res) => {
    await consoleAuth.signOut(db, clock, sessionOf(req));
    clearCookie(req, res);
    res.status(204).end();
  });

  router.delete('/console/api/sessions', async (req, res) => {
    const ended = await consoleAuth.signOutEverywhere(db, clock, sessionOf(req).login_id);
    clearCookie(req, res);
    res.status(200).json({ ended } satisfies Json<'signOutEverywhere', 200>);
  });

  router.get('/console/api/keys', async (req, res) => {
    res.status(200).json({ keys: await keyViews(sessionOf(req).account_id) } satisfies Json<'listKeys', 200>);
  });

  router.post('/console/api/keys', async (req, res) => {
    const body = req.body as Body<'createKey'>;
    // A refused input (422 INVALID_REQUEST) or the key limit (409 KEY_LIMIT_REACHED) is the error mapping's to say.
    const created = await accounts.createKey(db, clock, config.keyPrefix, {
      accountId: sessionOf(req).account_id,
      name: body.name,
      scopes: body.scopes,
      monthlyCap: body.monthlyCap,
      expiresAt: body.expiresAt === undefined ? undefined : new Date(body.expiresAt),
    });
    res.status(201).json({ key: view({ ...accounts.describeKey(created.key), spendThisMonth: 0 }), secret: created.secret } satisfies Json<'createKey', 201>);
  });

  /** The account's key of the request's path, or 404 (unknown, or another account's). */
  async function ownKey(req: Request): Promise<Awaited<ReturnType<typeof accounts.listKeys>>[number]> {
    const mine = (await accounts.listKeys(db, sessionOf(req).account_id)).find((k) => k.id === req.params.keyId);
    if (!mine) throw notFound('No such key in this account.');
    return mine;
  }

  router.patch('/console/api/keys/:keyId', async (req, res) => {
    const body = req.body as Body<'updateKey'>;
    const mine = await ownKey(req);
    await accounts.updateKey(db, clock, mine.id, {
      name: body.name,
      monthlyCap: body.monthlyCap,
      expiresAt: typeof body.expiresAt === 'string' ? new Date(body.expiresAt) : body.expiresAt,
    });
    const changed = (await keyViews(mine.account_id)).find((k) => k.id === mine.id)!;
    res.status(200).json(changed satisfies Json<'updateKey', 200>);
  });

  router.delete('/console/api/keys/:keyId', async (req, res) => {
    const accountId = sessionOf(req).account_id;
    const mine = await ownKey(req);
    await accounts.revokeKey(db, clock, mine.id);
    const revoked = (await keyViews(accountId)).find((k) => k.id === mine.id)!;
    res.status(200).json(revoked satisfies Json<'revokeKey', 200>);
  });

  router.get('/console/api/account', async (req, res) => {
    res.status(200).json(await accountView(req));
  });

  router.patch('/console/api/account', async (req, res) => {
    const body = req.body as Body<'updateAccount'>;
    await accounts.updateAccount(db, clock, sessionOf(req).account_id, { paidConsent: body.paidConsent, contentPreference: body.contentPreference });
    res.status(200).json(await accountView(req));
  });

  router.get('/console/api/tasks', async (req, res) => {
    const accountId = sessionOf(req).account_id;
    const page = await listOwnedTasks(db, clock, signer, baseUrl(req), accountId, pageAsked(req));
    const names = new Map((await accounts.listKeys(db, accountId)).map((k) => [k.id, k.name]));
    const tasks = page.tasks.map((t) => ({ ...t, keyName: names.get(t.keyId) ?? '' }));
    res.status(200).json({ tasks, next: page.next } satisfies Json<'listTasks', 200>);
  });

  router.get('/console/api/usage', async (req, res) => {
    res.status(200).json((await accountUsage(db, clock, sessionOf(req).account_id)) satisfies Json<'getUsage', 200>);
  });

  router.get('/console/api/charges', async (req, res) => {
    res.status(200).json((await listLlmCharges(db, sessionOf(req).account_id, pageAsked(req))) satisfies Json<'listCharges', 200>);
  });
  router.get('/console/api/uploads', async (req, res) => {
    res.status(200).json((await listUploadedAssets(db, sessionOf(req).account_id, pageAsked(req))) satisfies Json<'listUploads', 200>);
  });
  router.get('/console/api/voices', async (req, res) => {
    res.status(200).json((await listOwnVoices(db, sessionOf(req).account_id, pageAsked(req))) satisfies Json<'listVoices', 200>);
  });

  return router;
}
