/**
 * The account console in a real browser: Debian's Chromium,
 * phone-width (375 px), driven by playwright-core against a server on a random
 * port. A holder accepts an invite, signs in by keyboard, creates a key and uses
 * its secret to make an image, sees the key's spend, changes consent and revokes
 * the key (the API then answers 401); a wrong password, an expired session and a
 * change without the CSRF token each get their clear answer. Screenshots go to
 * test-artifacts/console/. Skips, saying why, when Chromium is not installed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import { ARGS, CHROMIUM, missing } from './helpers/chromium.ts';
import { OffsetClock } from './helpers/db.ts';
import { run } from './helpers/run.ts';
import * as consoleLogins from '../server/domain/console.ts';

const ARTIFACTS = path.resolve(import.meta.dirname, '../test-artifacts/console');
const BIN = path.resolve(import.meta.dirname, '../scripts/gemforge.mjs');
const PASSWORD = 'a password of my own';
const IMAGE = { model: 'gemforge-image-1', prompt: 'a fox from the console', parameters: { resolution: '512' } };

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** The page fits a phone's width: nothing scrolls sideways. */
async function fitsWidth(page: Page): Promise<void> {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
  assert.ok(scroll <= width, `the page is ${scroll} px wide in a ${width} px window`);
}

describe('the account console in Chromium', { skip: missing }, () => {
  let s: TestServer;
  let browser: Browser;
  const clock = new OffsetClock();
  before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    s = await startTestServer({ clock });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60_000 });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });
  /** The gemforge CLI as a user runs it, with this key against this server. */
  const cli = (args: string[], key: string) =>
    run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', GEMFORGE_API_KEY: key, GEMFORGE_BASE_URL: s.url, GEMFORGE_POLL_SCHEDULE_MS: '100' } });

  it('when a holder accepts an invite, signs in by keyboard, makes a key, uses it from the CLI, changes consent and revokes it, then each step shows and the API and CLI follow', async () => {
    const accountId = await s.account({ gems: 1000, paidConsent: true });
    const { token } = await consoleLogins.invite(s.db, clock, { accountId, email: 'ada@example.com' });
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    page.on('request', (r) => {
      if (new URL(r.url()).origin !== s.url) failures.push(`a request elsewhere: ${r.url()}`);
    });

    // The invite: a password chosen twice, then signed in.
    await page.goto(`${s.url}/console#invite=${token}`);
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await page.locator('#signed-in-view').waitFor();
    assert.equal(new URL(page.url()).hash, '', 'the spent token leaves the address bar');
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.locator('#sign-in-view').waitFor();

    // A wrong password: the message in the page.
    await page.getByLabel('Email', { exact: true }).fill('ada@example.com');
    await page.getByLabel('Password', { exact: true }).fill('not my password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'The email or password is wrong.' }).waitFor();
    await shot(page, '01-wrong-password');

    // Signing in by keyboard only.
    await page.getByLabel('Password', { exact: true }).fill('');
    await page.getByLabel('Email', { exact: true }).focus();
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.locator('#account-balance').filter({ hasText: '1000 Gems' }).waitFor();
    assert.equal(await page.getByRole('alert').isHidden(), true, 'the old message is gone');
    await page.getByText('No text or extraction requests yet.').waitFor();
    await fitsWidth(page);
    await shot(page, '02-signed-in');

    // A key: the secret once, with a copy button.
    await page.getByLabel('Name', { exact: true }).fill('laptop');
    await page.getByLabel('Monthly Gem cap').fill('500');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secretField = page.getByLabel('Secret of the new key');
    await secretField.waitFor();
    const secret = await secretField.inputValue();
    assert.match(secret, /^gf_[0-9a-f]{64}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await fitsWidth(page);
    await shot(page, '03-key-created');
    await page.getByRole('button', { name: 'Done' }).click();
    assert.equal(await page.content().then((html) => html.includes(secret)), false, 'the secret is gone from the page');

    // The secret makes an image through the gemforge CLI; the key's spend shows after a reload.
    const made = await cli(['image', IMAGE.prompt, '--model', IMAGE.model, '--param', 'resolution=512', '--out', fs.mkdtempSync(path.join(s.dataDir, 'cli-')), '--json'], secret);
    assert.equal(made.code, 0, made.stderr);
    const { task } = JSON.parse(made.stdout) as { task: { id: string; status: string; chargedGems: number } };
    assert.equal(task.status, 'succeeded');
    await page.reload();
    await page.locator('#keys li').filter({ hasText: `${task.chargedGems} Gems (charges and holds)` }).waitFor();
    const shown = page.locator(`#tasks li[data-task-id="${task.id}"]`);
    await shown.filter({ hasText: `charged ${task.chargedGems}` }).waitFor();
    const preview = shown.getByRole('img');
    await preview.scrollIntoViewIfNeeded();
    await page.waitForFunction((id) => (document.querySelector(`#tasks li[data-task-id="${id}"] img`) as HTMLImageElement | null)?.naturalWidth! > 0, task.id);
    await shot(page, '04-task-shown');

    // A music task's output plays in the page: the player loads its metadata through the signed link.
    const music = await cli(['music', 'a short calm melody', '--param', 'duration=30', '--out', fs.mkdtempSync(path.join(s.dataDir, 'cli-')), '--json'], secret);
    assert.equal(music.code, 0, music.stderr);
    const musicTask = (JSON.parse(music.stdout) as { task: { id: string } }).task;
    await page.reload();
    await page.locator(`#tasks li[data-task-id="${musicTask.id}"] audio`).waitFor();
    await page.waitForFunction((id) => {
      const player = document.querySelector(`#tasks li[data-task-id="${id}"] audio`) as HTMLAudioElement | null;
      return !!player && player.readyState >= 1 && player.duration > 29;
    }, musicTask.id);

    // Consent off, kept after a reload.
    await page.getByLabel('Spend paid Gems').uncheck();
    await page.getByRole('status').filter({ hasText: 'Paid Gems will not be spent.' }).waitFor();
    await page.reload();
    await page.locator('#signed-in-view').waitFor();
    assert.equal(await page.getByLabel('Spend paid Gems').isChecked(), false);
    await page.getByLabel('Content preference').selectOption('strict');
    await page.getByRole('status').filter({ hasText: 'The content preference is strict.' }).waitFor();

    // A change without the CSRF token: refused with its code.
    const csrf = await page.evaluate(async () => {
      const res = await fetch('/console/api/account', { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"paidConsent":true}' });
      return { status: res.status, body: await res.json() };
    });
    assert.equal(csrf.status, 403);
    assert.equal(csrf.body.error.code, 'CSRF_TOKEN_INVALID');

    // Revoking asks first; then the API refuses the secret.
    await page.getByRole('button', { name: 'Revoke laptop' }).click();
    await shot(page, '05-revoke-confirm');
    await page.getByRole('button', { name: 'Yes, revoke laptop now' }).click();
    await page.locator('#keys li.revoked').waitFor();
    assert.equal((await errorOf(await s.call('GET', '/api/generate/models', { key: secret }))).code, 'INVALID_API_KEY');
    const refused = await cli(['models'], secret);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /INVALID_API_KEY|401/, refused.stderr);
    await shot(page, '06-key-revoked');

    // An idle session ends: the page asks to sign in again.
    clock.advance((s.config.consoleSession.idleSeconds + 1) * 1000);
    await page.reload();
    await page.locator('#sign-in-view').waitFor();
    await shot(page, '07-session-expired');

    assert.deepEqual(failures, []);
    await context.close();
  });
});
