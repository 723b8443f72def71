/**
 * GET /console: the account console page, with its script, style and icon under
 * /console/assets (built by console-page/build.ts). A strict Content-Security-Policy:
 * the page loads nothing but these, and nothing may frame it. The icon also
 * answers /favicon.ico, which browsers and link previews ask for on their own.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Router, type Response } from 'express';
import { ApiError } from '../http/api-error.ts';

/** The built page: HTML, the bundled script and the style sheet. */
export interface ConsolePage {
  html: string;
  js: string;
  css: string;
}

/** The policy: this origin only, and the public base URL's (where signed output links point, for previews) when one is set. */
function policy(publicBaseUrl: string | undefined): string {
  const outputs = publicBaseUrl ? ` ${new URL(publicBaseUrl).origin}` : '';
  return `default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'${outputs}; media-src 'self'${outputs}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`;
}

function send(res: Response, csp: string, type: string, body: string, cache = 'no-store'): void {
  res.set({
    'content-security-policy': csp,
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'cache-control': cache,
  });
  res.status(200).type(type).send(body);
}

/** The icon: a static SVG beside the page's sources, read once. */
const FAVICON = fs.readFileSync(path.resolve(import.meta.dirname, '../console-page/favicon.svg'), 'utf8');

export function consolePageRouter(page: ConsolePage | undefined, publicBaseUrl: string | undefined): Router {
  const router = Router();
  const csp = policy(publicBaseUrl);
  const built = (res: Response, pick: (p: ConsolePage) => string, type: string) => {
    if (!page) throw new ApiError(503, 'TEMPORARILY_UNAVAILABLE', 'The console page was not built on this server.');
    send(res, csp, type, pick(page));
  };
  router.get(['/console', '/console/'], (_req, res) => built(res, (p) => p.html, 'html'));
  router.get('/console/assets/console.js', (_req, res) => built(res, (p) => p.js, 'js'));
  router.get('/console/assets/console.css', (_req, res) => built(res, (p) => p.css, 'css'));
  // The icon never changes within a version and holds nothing private: cached, unlike the page.
  router.get(['/console/assets/favicon.svg', '/favicon.ico'], (_req, res) => send(res, csp, 'image/svg+xml', FAVICON, 'public, max-age=86400'));
  return router;
}
