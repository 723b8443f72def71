/**
 * The account console in a real browser: Debian's Chromium,
 * phone-width (375 px), driven by playwright-core against a server on a random
 * port. A holder accepts an invite, signs in by keyboard, creates a key and uses
 * its secret to make an image, sees the key's spend, changes consent and revokes
 * the key (the API then answers 401); a wrong password, an expired session and a
 * change without the CSRF token each get their clear answer. Then, on desktop
 * and phone widths: form errors in view, in the console's words, cleared when
 * fixed; local times with the UTC moment on hover; a key edited; tasks with
 * prompt, key and id, as thumbnails that open in full; the favicon; the usage
 * chart and each key's spend against its cap. Screenshots go to
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
import { consoleHolder, PASSWORD as HOLDER_PASSWORD } from './helpers/console.ts';
import { submit, waitForTask } from './helpers/tasks.ts';

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
  /**
   * A page signed in as a new holder (`gems` paid Gems), at `width` × 800, that
   * fails the test on a script error, a request elsewhere, a CSP violation or a 404.
   */
  async function holderPage(width: number, gems = 1000): Promise<{ page: Page; accountId: string; failures: string[]; close: () => Promise<void> }> {
    const { accountId, email } = await consoleHolder(s, { gems });
    const context = await browser.newContext({ viewport: { width, height: 800 }, timezoneId: 'America/New_York', locale: 'en-US' });
    const page = await context.newPage();
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) failures.push(m.text());
    });
    page.on('request', (r) => {
      if (new URL(r.url()).origin !== s.url) failures.push(`a request elsewhere: ${r.url()}`);
    });
    page.on('response', (r) => {
      if (r.status() === 404) failures.push(`404: ${r.url()}`);
    });
    await page.goto(`${s.url}/console`);
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password', { exact: true }).fill(HOLDER_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#signed-in-view').waitFor();
    await page.locator('#usage-chart svg.usage-chart').waitFor();
    return { page, accountId, failures, close: () => context.close() };
  }

  /** The element is inside the window's visible area. */
  async function inView(page: Page, selector: string): Promise<void> {
    const box = await page.locator(selector).boundingBox();
    const height = await page.evaluate(() => window.innerHeight);
    assert.ok(box && box.y >= 0 && box.y + box.height <= height, `${selector} is at ${JSON.stringify(box)} in a ${height} px high window`);
  }

  /** The gemforge CLI as a user runs it, with this key against this server. */
  const cli = (args: string[], key: string) =>
    run(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', GEMFORGE_API_KEY: key, GEMFORGE_BASE_URL: s.url, GEMFORGE_POLL_SCHEDULE_MS: '100' },
    });

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
    const made = await cli(
      ['image', IMAGE.prompt, '--model', IMAGE.model, '--param', 'resolution=512', '--out', fs.mkdtempSync(path.join(s.dataDir, 'cli-')), '--json'],
      secret,
    );
    assert.equal(made.code, 0, made.stderr);
    const { task } = JSON.parse(made.stdout) as { task: { id: string; status: string; chargedGems: number } };
    assert.equal(task.status, 'succeeded');
    await page.reload();
    await page
      .locator('#keys li')
      .filter({ hasText: `${task.chargedGems} Gems (charges and holds)` })
      .waitFor();
    const shown = page.locator(`#tasks li[data-task-id="${task.id}"]`);
    await shown.filter({ hasText: `charged ${task.chargedGems}` }).waitFor();
    const preview = shown.getByRole('img');
    await preview.scrollIntoViewIfNeeded();
    await page.waitForFunction((id) => (document.querySelector(`#tasks li[data-task-id="${id}"] img`) as HTMLImageElement | null)?.naturalWidth! > 0, task.id);
    await shot(page, '04-task-shown');

    // A music task's output plays in the page: the player loads its metadata through the signed link.
    const music = await cli(
      ['music', 'a short calm melody', '--param', 'duration=30', '--out', fs.mkdtempSync(path.join(s.dataDir, 'cli-')), '--json'],
      secret,
    );
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

  for (const width of [1280, 375]) {
    it(`when a key form is wrong (${width} px), then the problem shows beside the form in view, in the console's words, the field focused, and goes once the field changes`, async () => {
      const { page, failures, close } = await holderPage(width);
      // Checked in the page: a negative cap.
      await page.getByLabel('Name', { exact: true }).fill('laptop');
      await page.getByLabel('Monthly Gem cap').fill('-5');
      await page.getByRole('button', { name: 'Create key' }).click();
      const box = page.locator('#create-key-problem');
      await box.waitFor();
      assert.match(await box.innerText(), /whole number of Gems, 0 or more/);
      await inView(page, '#create-key-problem');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'key-cap');
      assert.equal(await page.locator('#key-cap').getAttribute('aria-invalid'), 'true');
      await shot(page, `10-cap-refused-${width}`);
      await page.getByLabel('Monthly Gem cap').fill('5');
      assert.equal(await box.isHidden(), true, 'the problem goes once the field changes');

      // Refused by the API's validator: said in the console's words, not the validator's.
      await page.route('**/console/api/keys', (route) =>
        route.request().method() === 'POST'
          ? route.continue({ postData: JSON.stringify({ ...route.request().postDataJSON(), monthlyCap: -1 }) })
          : route.continue(),
      );
      await page.getByRole('button', { name: 'Create key' }).click();
      await box.waitFor();
      const said = await box.innerText();
      assert.match(said, /monthly cap is a whole number/);
      assert.doesNotMatch(said, /body\.|>=/, "never the validator's wording");
      await inView(page, '#create-key-problem');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'key-cap');
      await page.unroute('**/console/api/keys');

      // An expiry in the past.
      await page.getByLabel('Expires').fill('2001-01-01T10:00');
      await page.getByRole('button', { name: 'Create key' }).click();
      await box.filter({ hasText: 'The expiry must be in the future' }).waitFor();
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'key-expires');
      await page.getByLabel('Expires').fill('');
      assert.equal(await box.isHidden(), true);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Secret of the new key').waitFor();
      assert.deepEqual(failures, []);
      await close();
    });
  }

  it("when an invite's two passwords differ, then the problem shows at the second field, focused, and goes as it is retyped", async () => {
    const accountId = await s.account({ gems: 10 });
    const { token } = await consoleLogins.invite(s.db, clock, { accountId, email: `stale-${process.pid}@example.com` });
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${s.url}/console#invite=${token}`);
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(`${PASSWORD}!`);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    const box = page.locator('#invite-problem');
    await box.filter({ hasText: 'The two passwords differ' }).waitFor();
    await inView(page, '#invite-problem');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'invite-confirm');
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    assert.equal(await box.isHidden(), true, 'no stale "passwords differ"');
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await page.locator('#signed-in-view').waitFor();
    await context.close();
  });

  it("when a holder edits a key's name, expiry and cap, then the list shows them in local time with the UTC moment on hover, and the API applies the cap", async () => {
    const { page, accountId, failures, close } = await holderPage(375);
    const { secret } = await s.key(accountId, { name: 'laptop' });
    await page.reload();
    await page.getByRole('button', { name: 'Edit laptop' }).click();
    await page.getByLabel('Name of laptop').fill('desk');
    await page.getByLabel('Cap of laptop').fill('-1');
    await page.getByRole('button', { name: 'Save laptop' }).click();
    const problem = page.locator('.edit-key .problem');
    await problem.filter({ hasText: 'whole number of Gems' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('name')), 'cap');
    await page.getByLabel('Cap of laptop').fill('0');
    assert.equal(await problem.isHidden(), true);
    await page.getByLabel('Expiry of laptop').fill('2099-06-01T09:30');
    await page.getByRole('button', { name: 'Save laptop' }).click();
    await page.getByRole('status').filter({ hasText: 'Key desk is saved.' }).waitFor();
    const item = page.locator('#keys li').filter({ hasText: 'desk' });
    await item.filter({ hasText: '0 Gems' }).waitFor();
    // Entered as New York time, stored as its UTC moment, shown again in local time.
    const expiry = item.locator('dd time').first();
    assert.equal(await expiry.getAttribute('datetime'), '2099-06-01T13:30:00.000Z');
    assert.equal(await expiry.getAttribute('title'), '2099-06-01 13:30:00 UTC');
    assert.match(await expiry.innerText(), /Jun 1, 2099,? 9:30/);
    for (const time of await page.locator('#keys time').all()) assert.match((await time.getAttribute('title')) ?? '', / UTC$/);
    await shot(page, '11-key-edited');
    assert.equal((await submit(s, secret, '/api/generate/image', IMAGE)).body.error?.code, 'API_KEY_LIMIT', 'the new cap of 0 binds');
    assert.deepEqual(failures, []);
    await close();
  });

  it('when the account has image tasks, then each shows its prompt, key and id with fixed small lazy thumbnails that open the full output, and the page has a favicon', async () => {
    const { page, accountId, failures, close } = await holderPage(1280, 5000);
    const { secret } = await s.key(accountId, { name: 'studio' });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await submit(s, secret, '/api/generate/image', { ...IMAGE, prompt: `a fox number ${i} ${'in the snow '.repeat(20)}` })).body.task.id);
    const last = await waitForTask(s, secret, ids.at(-1)!);
    for (const id of ids) await waitForTask(s, secret, id);
    await page.reload();
    const item = page.locator(`#tasks li[data-task-id="${last.id}"]`);
    await item.waitFor();
    const text = await item.innerText();
    for (const part of ['a fox number 5 in the snow', 'studio', last.id]) assert.ok(text.includes(part), `the task shows ${part}`);
    const thumb = item.locator('a.thumb img');
    assert.equal(await thumb.getAttribute('loading'), 'lazy');
    await thumb.scrollIntoViewIfNeeded();
    await page.waitForFunction((id) => (document.querySelector(`#tasks li[data-task-id="${id}"] img`) as HTMLImageElement | null)?.naturalWidth! > 0, last.id);
    const size = await thumb.boundingBox();
    assert.deepEqual([size?.width, size?.height], [96, 96], 'a fixed small size whatever the output');
    const tallest = Math.max(...(await page.locator('#tasks li').evaluateAll((lis) => lis.map((li) => li.getBoundingClientRect().height))));
    assert.ok(tallest < 400, `a task takes ${tallest} px`);
    await shot(page, '12-task-thumbnails');
    const [full] = await Promise.all([page.context().waitForEvent('page'), thumb.click()]);
    await full.waitForLoadState();
    assert.equal(full.url(), await item.locator('a.thumb').getAttribute('href'), 'the thumbnail opens its link');
    assert.equal(new URL(full.url()).pathname, new URL(last.outputs[0]!.asset!.url).pathname, 'which is the full output (signed afresh)');
    assert.ok((await full.evaluate(() => (document.querySelector('img') as HTMLImageElement | null)?.naturalWidth ?? 0)) > 96, 'in full size');
    await full.close();

    const icon = await page.evaluate(async () => {
      const href = document.querySelector<HTMLLinkElement>('link[rel=icon]')!.href;
      const [own, root] = await Promise.all([fetch(href), fetch('/favicon.ico')]);
      return { own: [own.status, own.headers.get('content-type')], root: [root.status, root.headers.get('content-type')] };
    });
    assert.deepEqual(icon.own, [200, 'image/svg+xml; charset=utf-8']);
    assert.deepEqual(icon.root, [200, 'image/svg+xml; charset=utf-8'], '/favicon.ico is an icon, not the JSON 404');
    assert.deepEqual(failures, []);
    await close();
  });

  it("when keys spent today, then the usage chart shows 30 days with today's Gems by kind on hover and each key's spend against its cap", async () => {
    const { page, accountId, failures, close } = await holderPage(375, 5000);
    const capped = await s.key(accountId, { name: 'capped', cap: 500 });
    const open = await s.key(accountId, { name: 'open' });
    const a = await waitForTask(s, capped.secret, (await submit(s, capped.secret, '/api/generate/image', IMAGE)).body.task.id);
    const b = await waitForTask(s, open.secret, (await submit(s, open.secret, '/api/generate/image', IMAGE)).body.task.id);
    await page.reload();
    await page.locator('#usage-chart svg.usage-chart').waitFor();
    const days = page.locator('#usage-chart g.day');
    assert.equal(await days.count(), 30);
    const today = days.last();
    const drawn = await today
      .locator('rect[data-kind]')
      .evaluateAll((rects) => rects.map((r) => [r.getAttribute('data-kind'), Number(r.getAttribute('data-gems'))]));
    assert.deepEqual(drawn, [['image', a.chargedGems + b.chargedGems]]);
    assert.match((await today.locator('title').textContent()) ?? '', new RegExp(`${a.chargedGems + b.chargedGems} Gems — image`));
    const meter = page.locator('#usage-keys li').filter({ hasText: 'capped' }).locator('meter');
    assert.deepEqual(await meter.evaluate((m: HTMLMeterElement) => [m.value, m.max]), [a.chargedGems, 500]);
    await page.locator('#usage-keys li').filter({ hasText: 'open' }).filter({ hasText: 'no cap' }).waitFor();
    await page.locator('#usage-title').scrollIntoViewIfNeeded();
    await fitsWidth(page);
    await shot(page, '13-usage');
    assert.deepEqual(failures, []);
    await close();
  });
});
