/**
 * The reference page in a real browser: Debian's
 * Chromium driven by playwright-core loads /docs from a server on a random port,
 * authorizes with a key, and runs "Try it out" on listModels and on two image
 * submissions with different bodies. The requests go to the page's own origin,
 * and each try carries a fresh Idempotency-Key (so the second is not a 409).
 * Skips, saying why, when Chromium is not installed (`.ci/run` installs it).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page, type Request as PwRequest } from 'playwright-core';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { ARGS, CHROMIUM, missing } from './helpers/chromium.ts';

/** Opens an operation, switches on "Try it out", optionally replaces the body, runs it and returns the API request and its status. */
async function tryItOut(
  page: Page,
  opId: string,
  apiPath: string,
  editBody?: (body: string) => string,
): Promise<{ request: PwRequest; status: number; shown: string }> {
  const op = page.locator(`#operations-${opId}`);
  // "Try it out" becomes "Cancel" (and a "Reset" appears) once switched on.
  const tryOut = op.locator('button.try-out__btn').first();
  if (!(await tryOut.isVisible())) await op.locator('.opblock-summary').first().click();
  if ((await tryOut.textContent())?.includes('Try it out')) await tryOut.click();
  if (editBody) {
    const area = op.locator('textarea.body-param__text');
    await area.fill(editBody(await area.inputValue()));
  }
  const [response] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname === apiPath && r.request().method() !== 'OPTIONS', { timeout: 20_000 }),
    op.locator('button.execute').click(),
  ]);
  await op.locator('.live-responses-table tr.response .response-col_status').first().waitFor({ timeout: 20_000 });
  const shown = (await op.locator('.live-responses-table tr.response .response-col_status').first().textContent()) ?? '';
  await op
    .locator('button.btn-clear')
    .click()
    .catch(() => undefined);
  return { request: response.request(), status: response.status(), shown: shown.trim() };
}

describe('the API reference page in Chromium', { skip: missing }, () => {
  let s: TestServer;
  let browser: BrowserContext;
  let secret: string;
  let profile: string;
  before(async () => {
    s = await startTestServer();
    secret = (await s.user({ gems: 1000 })).secret;
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-chromium-'));
    // A fresh profile directory (Playwright passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60_000 });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });

  it('when /docs is authorized with a key, then Try it out lists models and submits two different images against this very server', async () => {
    const page = await browser.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    page.on('requestfailed', (r) => failures.push(`${r.url()}: ${r.failure()?.errorText}`));
    await page.goto(`${s.url}/docs`);
    await page.locator('#operations-Models-listModels').waitFor({ timeout: 30_000 });

    await page.locator('button.authorize').first().click();
    await page.locator('.modal-ux input').first().fill(secret);
    await page.locator('.modal-ux button.authorize').click();
    await page.locator('.modal-ux button.close-modal').click();

    const models = await tryItOut(page, 'Models-listModels', '/api/generate/models');
    assert.equal(models.status, 200);
    assert.equal(new URL(models.request.url()).origin, s.url, 'the page calls the server that serves it');
    assert.equal(models.request.headers().authorization, `Bearer ${secret}`);
    assert.match(models.shown, /200/);

    const first = await tryItOut(page, 'Media-createImage', '/api/generate/image', (b) => b.replace(/"resolution": "1024"/, '"resolution": "512"'));
    assert.equal(first.status, 202, 'the first image submission is accepted');
    const second = await tryItOut(page, 'Media-createImage', '/api/generate/image', (b) =>
      b.replace(/"prompt": "[^"]*"/, '"prompt": "A second, different lighthouse"'),
    );
    assert.equal(second.status, 202, 'a second try with another body is a new submission, not 409 IDEMPOTENCY_CONFLICT');
    const keys = [first, second].map((t) => t.request.headers()['idempotency-key']);
    assert.ok(
      keys.every((k) => /^docs-[0-9a-f]{24}$/.test(k ?? '')),
      `fresh keys: ${keys}`,
    );
    assert.notEqual(keys[0], keys[1]);
    assert.equal((await s.db('tasks')).length, 2, 'two tasks were created');
    assert.deepEqual(failures, []);
    await page.close();
  });
});
