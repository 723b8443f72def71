/**
 * The account console page, bundled by esbuild at server start
 * (console-page/build.ts) and served from /console/assets: nothing is fetched
 * from anywhere but this server. It calls the console API through openapi-fetch
 * typed by generated/console.ts, and sends the session's CSRF token on every
 * state change. An invite link carries its token in the fragment (#invite=…),
 * which the browser never sends to a server.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from '../../generated/console.ts';
import { problemBox, when } from './show.ts';
import { dailyChart, dailyTable, keySpend, legend } from './usage.ts';

type Key = components['schemas']['Key'];
type Account = components['schemas']['Account'];
type Task = components['schemas']['Task'];
type Charge = components['schemas']['Charge'];
type Upload = components['schemas']['Upload'];
type Voice = components['schemas']['Voice'];
type Problem = { error?: { code?: string; message?: string } } | undefined;

let csrfToken = '';
const api = createClient<paths>({ baseUrl: '/console/api', credentials: 'same-origin' });
const withCsrf: Middleware = {
  onRequest({ request }) {
    if (request.method !== 'GET' && csrfToken) request.headers.set('X-CSRF-Token', csrfToken);
    return request;
  },
};
api.use(withCsrf);

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const views = ['sign-in-view', 'invite-view', 'signed-in-view'] as const;

function show(view: (typeof views)[number]): void {
  for (const v of views) $(v).hidden = v !== view;
  $('who').hidden = view !== 'signed-in-view';
}

function say(text: string): void {
  $('status').textContent = text;
}

/** Shows an API error's message (the Error envelope) of what no form asked for (loading a list), or hides the box. */
function problem(error: Problem | string | null): void {
  const box = $('problem');
  const text = typeof error === 'string' ? error : (error?.error?.message ?? '');
  box.textContent = text;
  box.hidden = !text;
  if (text) box.scrollIntoView({ block: 'nearest' });
}

/**
 * An event listener running `handle`, whose failure (the server out of reach)
 * is shown in the problem box instead of being left an unhandled rejection.
 */
function listener<E extends Event>(handle: (event: E) => Promise<unknown>): (event: E) => void {
  return (event) => void handle(event).catch(() => problem('The server could not be reached: try again.'));
}

function inviteToken(): string | undefined {
  const match = /^#invite=([A-Za-z0-9_-]+)$/.exec(location.hash);
  return match?.[1];
}

async function signedIn(): Promise<void> {
  show('signed-in-view');
  await Promise.all([loadAccount(), loadKeys(), loadUsage(), loadTasks(), loadCharges(), loadUploads(), loadVoices()]);
}

/** The usage view: the last 30 days' Gems per day and kind, and each key's spend against its cap. */
async function loadUsage(): Promise<void> {
  const { data, error } = await api.GET('/usage');
  if (!data) return problem(error ?? null);
  $('usage-chart').replaceChildren(dailyChart(data.days), legend(data.days));
  $('usage-table').replaceChildren(dailyTable(data.days));
  $('usage-keys').replaceChildren(...data.keys.map(keySpend));
  $('no-usage-keys').hidden = data.keys.length > 0;
}

/** The start of a task's prompt as the list shows it (the whole of what the API sent on hover). */
function promptLine(prompt: string): HTMLElement {
  const p = document.createElement('span');
  p.className = 'prompt';
  p.textContent = prompt || '(none)';
  p.title = prompt;
  return p;
}

/** An output as a fixed-size thumbnail (loaded when scrolled to) that opens the full file in a new tab. */
function thumbnail(url: string, label: string): HTMLAnchorElement {
  const link = document.createElement('a');
  link.href = url;
  link.target = '_blank';
  link.rel = 'noopener';
  link.className = 'thumb';
  link.title = `${label}: open in full`;
  const img = document.createElement('img');
  img.src = url;
  img.alt = label;
  img.loading = 'lazy';
  img.decoding = 'async';
  img.width = THUMB_PX;
  img.height = THUMB_PX;
  link.append(img);
  return link;
}

/** Thumbnails' edge in CSS pixels (console.css sizes them the same). */
const THUMB_PX = 96;

/**
 * One task: what it is, its prompt's start, the key that made it, its id, status
 * and Gems, and its outputs (images as thumbnails that open in full, video and
 * audio playable, each also a link).
 */
function taskItem(task: Task): HTMLLIElement {
  const li = factsItem(`${task.kind} · ${task.model} · ${task.status}`, [
    ['Prompt', promptLine(task.prompt)],
    ['Key', task.keyName || task.keyId],
    ['Task id', code(task.id)],
    ['Gems', `quoted ${task.quotedGems}, charged ${task.chargedGems}, released ${task.releasedGems}`],
    ['Created', when(task.createdAt)],
    task.error && ['Error', `${task.error.code}: ${task.error.message}`],
  ]);
  li.dataset.taskId = task.id;
  const thumbs = document.createElement('div');
  thumbs.className = 'thumbs';
  for (const output of task.outputs) {
    if (!output.asset) continue;
    const label = `Output ${output.index + 1} of task ${task.id}`;
    if (output.asset.kind === 'image') {
      thumbs.append(thumbnail(output.asset.url, label));
    } else if (output.asset.kind === 'video' || output.asset.kind === 'audio') {
      const player = document.createElement(output.asset.kind);
      player.controls = true;
      player.preload = 'metadata';
      player.src = output.asset.url;
      player.setAttribute('aria-label', label);
      li.append(player);
    }
    if (output.asset.kind !== 'image') {
      const a = document.createElement('a');
      a.href = output.asset.url;
      a.textContent = `Output ${output.index + 1} (${output.asset.mimeType})`;
      li.append(a);
    }
  }
  if (thumbs.childElementCount) li.append(thumbs);
  return li;
}

function code(text: string): HTMLElement {
  const c = document.createElement('code');
  c.textContent = text;
  return c;
}

function chargeItem(charge: Charge): HTMLLIElement {
  return factsItem(`${charge.ref ?? charge.id} · ${charge.state}`, [
    ['Gems', `held ${charge.heldGems}, charged ${charge.chargedGems}, released ${charge.releasedGems}`],
    ['Created', when(charge.createdAt)],
  ]);
}

function uploadItem(upload: Upload): HTMLLIElement {
  return factsItem(`${upload.filename ?? upload.id} · ${upload.kind}`, [
    ['Type', `${upload.mimeType}, ${upload.sizeBytes.toLocaleString('en-US')} bytes`],
    ['Uploaded', when(upload.createdAt)],
    upload.deletedAt && ['Deleted', when(upload.deletedAt)],
  ]);
}

function voiceItem(voice: Voice): HTMLLIElement {
  return factsItem(`${voice.name} · ${voice.state}`, [
    voice.language && ['Language', voice.language],
    voice.durationSeconds !== null && ['Sample', `${voice.durationSeconds.toFixed(1)} s`],
    ['Created', when(voice.createdAt)],
  ]);
}

/** A list item: its title, then its facts as a definition list (a fact that is not there is left out). */
function factsItem(title: string, facts: ReadonlyArray<readonly [term: string, value: string | Node] | false | null | undefined | ''>): HTMLLIElement {
  const li = document.createElement('li');
  const strong = document.createElement('strong');
  strong.textContent = title;
  const list = document.createElement('dl');
  for (const f of facts) if (f) fact(list, f[0], f[1]);
  li.append(strong, list);
  return li;
}

/** The console's paged lists: each is its API path, its key in the answer, and its elements in the page. */
type Listed = 'tasks' | 'charges' | 'uploads' | 'voices';
type PageOf<N extends Listed> = paths[`/${N}`]['get']['responses'][200]['content']['application/json'];
type RowOf<N extends Listed> = PageOf<N> extends Record<N, Array<infer R>> ? R : never;

/**
 * One page of each list: the four paths share one shape (a cursor in, a page
 * out), each called with its literal path so openapi-fetch types it; indexed by
 * a list's name, the table gives that list's own page type.
 */
const pages: { [N in Listed]: (query: { cursor?: string }) => Promise<{ data?: PageOf<N>; error?: Problem }> } = {
  tasks: (query) => api.GET('/tasks', { params: { query } }),
  charges: (query) => api.GET('/charges', { params: { query } }),
  uploads: (query) => api.GET('/uploads', { params: { query } }),
  voices: (query) => api.GET('/voices', { params: { query } }),
};

/**
 * A paged list (newest first) in the page, from GET /{name} into #{name}, with
 * #no-{name} shown when it is empty and #older-{name} while there are more:
 * `load(true)` appends the next page after those shown, `load()` shows the first again.
 */
function pagedList<N extends Listed>(name: N, item: (row: RowOf<N>) => HTMLElement) {
  const [list, empty, older] = [name, `no-${name}`, `older-${name}`];
  let next: string | null = null;
  const load = async (more = false): Promise<void> => {
    const cursor = more && next ? next : undefined;
    const { data, error } = await pages[name](cursor ? { cursor } : {});
    problem(error ?? null);
    if (!data) return;
    const items = (data as Record<N, Array<RowOf<N>>>)[name].map(item);
    if (more) $(list).append(...items);
    else $(list).replaceChildren(...items);
    next = data.next;
    $(older).hidden = next === null;
    $(empty).hidden = $(list).childElementCount > 0;
  };
  $(older).addEventListener(
    'click',
    listener(() => load(true)),
  );
  return load;
}

const loadTasks = pagedList('tasks', taskItem);
const loadCharges = pagedList('charges', chargeItem);
const loadUploads = pagedList('uploads', uploadItem);
const loadVoices = pagedList('voices', voiceItem);

function showAccount(account: Account): void {
  csrfToken = account.csrfToken;
  $('who-email').textContent = account.email;
  $('account-balance').textContent = `${account.balance} Gems`;
  $('account-allowance').textContent = `${account.llmAllowanceUsed} of ${account.llmAllowance} (${account.month})`;
  const held = account.outstandingReservations;
  $('account-reservations').textContent = `${held.count} (${held.gems} Gems held)`;
  $<HTMLInputElement>('paid-consent').checked = account.paidConsent;
  $<HTMLSelectElement>('content-preference').value = account.contentPreference;
  $('account-state').textContent = account.state;
  showModeration(account.moderation);
}

/** Moderation refusals not cleared, and the block they set: shown only when there are any. */
function showModeration({ blockedAt, refusals }: Account['moderation']): void {
  $('moderation').hidden = !blockedAt && refusals.length === 0;
  const blocked = $('moderation-blocked');
  blocked.replaceChildren();
  if (blockedAt) blocked.append('Requests are refused since ', when(blockedAt), ': too many were refused by moderation. Ask the operator to review them.');
  $('moderation-refusals').replaceChildren(
    ...refusals.map((r) => {
      const li = document.createElement('li');
      li.append(when(r.createdAt), `: ${r.operation}, ${r.field} refused (${r.categories.join(', ')})`);
      return li;
    }),
  );
}

async function loadAccount(): Promise<boolean> {
  const { data, response } = await api.GET('/account');
  if (!data) {
    if (response.status === 401) show(inviteToken() ? 'invite-view' : 'sign-in-view');
    return false;
  }
  showAccount(data);
  return true;
}

function fact(list: HTMLElement, term: string, value: string | Node): void {
  const dt = document.createElement('dt');
  dt.textContent = term;
  const dd = document.createElement('dd');
  dd.append(value);
  list.append(dt, dd);
}

/** One key in the list: its facts and, unless revoked, an edit button and a revoke button that asks to be confirmed. */
function keyItem(key: Key): HTMLLIElement {
  const li = document.createElement('li');
  li.dataset.keyId = key.id;
  if (key.revokedAt) li.className = 'revoked';
  const title = document.createElement('strong');
  title.textContent = `${key.name} ${key.hint}`;
  const facts = document.createElement('dl');
  fact(facts, 'Scopes', key.scopes.join(', '));
  fact(facts, 'Monthly cap', key.monthlyCap === null ? 'none' : `${key.monthlyCap} Gems`);
  fact(facts, 'This month', `${key.spendThisMonth} Gems (charges and holds)`);
  fact(facts, 'Expires', key.expiresAt ? when(key.expiresAt) : 'never');
  fact(facts, 'Created', when(key.createdAt));
  fact(facts, 'Last used', key.lastUsedAt ? when(key.lastUsedAt) : 'never');
  if (key.revokedAt) fact(facts, 'Revoked', when(key.revokedAt));
  li.append(title, facts);
  if (!key.revokedAt) li.append(editButton(key), revokeButton(key));
  return li;
}

/** A `datetime-local` input's value for a UTC moment, in the reader's local time. */
function localInput(iso: string): string {
  const at = new Date(iso);
  return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** The moment of a `datetime-local` value, read as the reader's local time; undefined when it is no moment. */
function fromLocalInput(value: string): string | undefined {
  const at = new Date(value); // a date-time without an offset is local time
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/** A labelled input for the key edit form. */
function editField(form: HTMLFormElement, id: string, label: string, attributes: Record<string, string>): HTMLInputElement {
  const l = document.createElement('label');
  l.htmlFor = id;
  l.textContent = label;
  const field = document.createElement('input');
  for (const [name, value] of Object.entries({ ...attributes, id })) field.setAttribute(name, value);
  form.append(l, field);
  return field;
}

/** A plain button (not a form's submit) saying `text`. */
function button(text: string, className = ''): HTMLButtonElement {
  return Object.assign(document.createElement('button'), { type: 'button', textContent: text, className });
}

let edits = 0;

/** The key's settings (spec: name, expiry, monthly cap) in a form of their own, opened by "Edit". */
function editButton(key: Key): HTMLElement {
  const box = document.createElement('div');
  const open = button(`Edit ${key.name}`);
  open.addEventListener('click', () => {
    const n = edits++;
    const form = document.createElement('form');
    form.className = 'edit-key';
    form.noValidate = true; // the console checks and says what is wrong itself, beside the form
    form.setAttribute('aria-label', `Settings of ${key.name}`);
    const name = editField(form, `edit-name-${n}`, `Name of ${key.name}`, { name: 'name', value: key.name, maxlength: '200' });
    const expires = editField(form, `edit-expires-${n}`, `Expiry of ${key.name} (your local time; empty: never)`, {
      name: 'expires',
      type: 'datetime-local',
      value: key.expiresAt ? localInput(key.expiresAt) : '',
    });
    const cap = editField(form, `edit-cap-${n}`, `Cap of ${key.name} in Gems a month (empty: none; 0 disables spending)`, {
      name: 'cap',
      type: 'number',
      inputmode: 'numeric',
      step: '1',
      value: key.monthlyCap === null ? '' : String(key.monthlyCap),
    });
    const problemEl = Object.assign(document.createElement('p'), { id: `edit-problem-${n}`, className: 'problem', hidden: true, tabIndex: -1 });
    problemEl.setAttribute('role', 'alert');
    const save = Object.assign(document.createElement('button'), { type: 'submit', textContent: `Save ${key.name}` });
    const cancel = button('Cancel');
    cancel.addEventListener('click', () => box.replaceChildren(open));
    form.append(problemEl, save, cancel);
    const problems = problemBox(form, problemEl);
    form.addEventListener(
      'submit',
      listener(async (event) => {
        event.preventDefault();
        const checked = checkKeyFields({ name, expires, cap }, problems.show);
        if (!checked) return;
        const { data, error } = await api.PATCH('/keys/{keyId}', {
          params: { path: { keyId: key.id } },
          body: { name: checked.name, expiresAt: checked.expiresAt ?? null, monthlyCap: checked.monthlyCap ?? null },
        });
        if (!data) return problems.api(error ?? null, { name, expiresAt: expires, monthlyCap: cap });
        say(`Key ${data.name} is saved.`);
        await Promise.all([loadKeys(), loadUsage()]);
        $(`keys`).querySelector<HTMLElement>(`li[data-key-id="${key.id}"] button`)?.focus();
      }),
    );
    box.replaceChildren(form);
    name.focus();
  });
  box.append(open);
  return box;
}

/**
 * A key form's fields checked before anything is sent, in the console's words:
 * the settings to send, or undefined after `show` said what to fix (and where).
 */
function checkKeyFields(
  f: { name: HTMLInputElement; expires: HTMLInputElement; cap: HTMLInputElement },
  show: (text: string, field: HTMLElement) => void,
): { name: string; expiresAt?: string; monthlyCap?: number } | undefined {
  const name = f.name.value.trim();
  if (!name) return void show('Give the key a name.', f.name);
  let expiresAt: string | undefined;
  if (f.expires.value) {
    expiresAt = fromLocalInput(f.expires.value);
    if (!expiresAt) return void show('The expiry is not a date and time; pick one, or leave it empty for a key that does not expire.', f.expires);
    if (Date.parse(expiresAt) <= Date.now()) return void show('The expiry must be in the future; leave it empty for a key that does not expire.', f.expires);
  }
  let monthlyCap: number | undefined;
  if (f.cap.value !== '' || f.cap.validity.badInput) {
    monthlyCap = Number(f.cap.value);
    if (f.cap.validity.badInput || !Number.isSafeInteger(monthlyCap) || monthlyCap < 0) {
      return void show('The monthly cap is a whole number of Gems, 0 or more (0 disables spending); leave it empty for no cap.', f.cap);
    }
  }
  return { name, ...(expiresAt && { expiresAt }), ...(monthlyCap !== undefined && { monthlyCap }) };
}

function revokeButton(key: Key): HTMLElement {
  const box = document.createElement('div');
  const ask = button(`Revoke ${key.name}`);
  ask.addEventListener('click', () => {
    const confirm = button(`Yes, revoke ${key.name} now`, 'danger');
    const cancel = button('Keep it');
    cancel.addEventListener('click', () => box.replaceChildren(ask));
    confirm.addEventListener(
      'click',
      listener(async () => {
        const { error } = await api.DELETE('/keys/{keyId}', { params: { path: { keyId: key.id } } });
        problem(error ?? null);
        if (!error) say(`Key ${key.name} is revoked.`);
        await Promise.all([loadKeys(), loadUsage()]);
      }),
    );
    box.replaceChildren(confirm, cancel);
    confirm.focus();
  });
  box.append(ask);
  return box;
}

async function loadKeys(): Promise<void> {
  const { data, error } = await api.GET('/keys');
  if (error) return problem(error);
  $('keys').replaceChildren(...[...data.keys].reverse().map(keyItem));
}

const signInProblem = problemBox($('sign-in-form'), $('sign-in-problem'));
$('sign-in-form').addEventListener(
  'submit',
  listener(async (event) => {
    event.preventDefault();
    const form = new FormData(event.target as HTMLFormElement);
    const { data, error } = await api.POST('/session', { body: { email: String(form.get('email')), password: String(form.get('password')) } });
    if (!data) return signInProblem.api(error ?? null, { email: $('sign-in-email'), password: $('sign-in-password') });
    signInProblem.clear();
    problem(null);
    csrfToken = data.csrfToken;
    $<HTMLInputElement>('sign-in-password').value = '';
    say(`Signed in as ${data.email}.`);
    await signedIn();
  }),
);

const inviteProblem = problemBox($('invite-form'), $('invite-problem'));
$('invite-form').addEventListener(
  'submit',
  listener(async (event) => {
    event.preventDefault();
    const form = new FormData(event.target as HTMLFormElement);
    const password = String(form.get('password'));
    if (Array.from(password).length < 12) return inviteProblem.show('Choose a password of 12 characters or more.', $('invite-password'));
    if (!/\S/.test(password)) return inviteProblem.show('The password must not be only spaces.', $('invite-password'));
    if (password !== String(form.get('confirm'))) return inviteProblem.show('The two passwords differ: type the same password twice.', $('invite-confirm'));
    const { data, error } = await api.POST('/invites/accept', { body: { token: inviteToken() ?? '', password } });
    if (!data) return inviteProblem.api(error ?? null, { password: $('invite-password') });
    inviteProblem.clear();
    history.replaceState(null, '', location.pathname); // the token is spent: out of the address bar
    csrfToken = data.csrfToken;
    say(`Welcome, ${data.email}.`);
    await signedIn();
  }),
);

const createProblem = problemBox($('create-key-form'), $('create-key-problem'));
$('create-key-form').addEventListener(
  'submit',
  listener(async (event) => {
    event.preventDefault();
    const formElement = event.target as HTMLFormElement;
    const fields = { name: $<HTMLInputElement>('key-name'), expires: $<HTMLInputElement>('key-expires'), cap: $<HTMLInputElement>('key-cap') };
    const checked = checkKeyFields(fields, createProblem.show);
    if (!checked) return;
    const scopes = new FormData(formElement).getAll('scope').map(String) as Key['scopes'];
    if (scopes.length === 0) return createProblem.show('Choose at least one scope.', formElement.querySelector<HTMLElement>('input[name=scope]'));
    const { data, error } = await api.POST('/keys', { body: { ...checked, scopes } });
    if (!data) return createProblem.api(error ?? null, { name: fields.name, expiresAt: fields.expires, monthlyCap: fields.cap });
    formElement.reset();
    $('new-secret').hidden = false;
    $<HTMLInputElement>('new-secret-value').value = data.secret;
    $('copy-secret').focus();
    say(`Key ${data.key.name} is created.`);
    await Promise.all([loadKeys(), loadUsage()]);
  }),
);

$('copy-secret').addEventListener(
  'click',
  listener(async () => {
    const field = $<HTMLInputElement>('new-secret-value');
    try {
      await navigator.clipboard.writeText(field.value);
      say('The secret is copied.');
    } catch {
      field.select(); // no clipboard permission (plain http): selected for Ctrl+C
      say('Select and copy the secret with Ctrl+C.');
    }
  }),
);

$('secret-done').addEventListener('click', () => {
  $<HTMLInputElement>('new-secret-value').value = '';
  $('new-secret').hidden = true;
});

/** Changes a setting of the account; the page shows what the server now holds. */
async function patchAccount(body: { paidConsent?: boolean; contentPreference?: Account['contentPreference'] }, done: string): Promise<void> {
  const { data, error } = await api.PATCH('/account', { body });
  accountProblem.api(error ?? null);
  if (!data) return void (await loadAccount());
  showAccount(data);
  say(done);
}

const accountProblem = problemBox($('account-settings'), $('account-problem'));
$('paid-consent').addEventListener(
  'change',
  listener((event) => {
    const paidConsent = (event.target as HTMLInputElement).checked;
    return patchAccount({ paidConsent }, paidConsent ? 'Paid Gems may now be spent.' : 'Paid Gems will not be spent.');
  }),
);

$('content-preference').addEventListener(
  'change',
  listener((event) => {
    const contentPreference = (event.target as HTMLSelectElement).value as Account['contentPreference'];
    return patchAccount({ contentPreference }, `The content preference is ${contentPreference}.`);
  }),
);

async function leave(path: '/session' | '/sessions'): Promise<void> {
  const { error } = await api.DELETE(path);
  problem(error ?? null);
  csrfToken = '';
  say(path === '/sessions' ? 'Signed out everywhere.' : 'Signed out.');
  show('sign-in-view');
}
$('sign-out').addEventListener(
  'click',
  listener(() => leave('/session')),
);
$('sign-out-everywhere').addEventListener(
  'click',
  listener(() => leave('/sessions')),
);

if (inviteToken()) show('invite-view');
else if (await loadAccount()) await signedIn();
