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

type Key = components['schemas']['Key'];
type Account = components['schemas']['Account'];
type Task = components['schemas']['Task'];
type Charge = components['schemas']['Charge'];
type Upload = components['schemas']['Upload'];
type Voice = components['schemas']['Voice'];
type Problem = { error?: { message?: string } } | undefined;

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

/** Shows an API error's message (the Error envelope), or hides the box. */
function problem(error: Problem | string | null): void {
  const box = $('problem');
  const text = typeof error === 'string' ? error : (error?.error?.message ?? '');
  box.textContent = text;
  box.hidden = !text;
}

function inviteToken(): string | undefined {
  const match = /^#invite=([A-Za-z0-9_-]+)$/.exec(location.hash);
  return match?.[1];
}

async function signedIn(): Promise<void> {
  show('signed-in-view');
  await Promise.all([loadAccount(), loadKeys(), loadTasks(), loadCharges(), loadUploads(), loadVoices()]);
}

/** One task: what it is, its status and Gems, and its outputs (images previewed, video and audio playable, each also a link). */
function taskItem(task: Task): HTMLLIElement {
  const li = factsItem(`${task.kind} · ${task.model} · ${task.status}`, [
    ['Gems', `quoted ${task.quotedGems}, charged ${task.chargedGems}, released ${task.releasedGems}`],
    ['Created', task.createdAt],
    task.error && ['Error', `${task.error.code}: ${task.error.message}`],
  ]);
  li.dataset.taskId = task.id;
  for (const output of task.outputs) {
    if (!output.asset) continue;
    const label = `Output ${output.index + 1} of task ${task.id}`;
    if (output.asset.kind === 'image') {
      const img = document.createElement('img');
      img.src = output.asset.url;
      img.alt = label;
      img.loading = 'lazy';
      li.append(img);
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
  return li;
}

function chargeItem(charge: Charge): HTMLLIElement {
  return factsItem(`${charge.ref ?? charge.id} · ${charge.state}`, [
    ['Gems', `held ${charge.heldGems}, charged ${charge.chargedGems}, released ${charge.releasedGems}`],
    ['Created', charge.createdAt],
  ]);
}

function uploadItem(upload: Upload): HTMLLIElement {
  return factsItem(`${upload.filename ?? upload.id} · ${upload.kind}`, [
    ['Type', `${upload.mimeType}, ${upload.sizeBytes.toLocaleString('en-US')} bytes`],
    ['Uploaded', upload.createdAt],
    upload.deletedAt && ['Deleted', upload.deletedAt],
  ]);
}

function voiceItem(voice: Voice): HTMLLIElement {
  return factsItem(`${voice.name} · ${voice.state}`, [
    voice.language && ['Language', voice.language],
    voice.durationSeconds !== null && ['Sample', `${voice.durationSeconds.toFixed(1)} s`],
    ['Created', voice.createdAt],
  ]);
}

/** A list item: its title, then its facts as a definition list (a fact that is not there is left out). */
function factsItem(title: string, facts: ReadonlyArray<readonly [term: string, value: string] | false | null | undefined | ''>): HTMLLIElement {
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
 * A paged list (newest first) in the page, from GET /{name} into #{name}, with
 * #no-{name} shown when it is empty and #older-{name} while there are more:
 * `load(true)` appends the next page after those shown, `load()` shows the first again.
 */
function pagedList<N extends Listed>(name: N, item: (row: RowOf<N>) => HTMLElement) {
  const [list, empty, older] = [name, `no-${name}`, `older-${name}`];
  let next: string | null = null;
  const load = async (more = false): Promise<void> => {
    const cursor = more && next ? next : undefined;
    // The four paths share one shape (cursor and limit in, a page out): one call for each of them.
    const get = api.GET as unknown as (path: `/${N}`, init: { params: { query: { cursor?: string } } }) => Promise<{ data?: PageOf<N>; error?: Problem }>;
    const { data, error } = await get(`/${name}`, { params: { query: cursor ? { cursor } : {} } });
    problem(error ?? null);
    if (!data) return;
    const items = (data as Record<N, Array<RowOf<N>>>)[name].map(item);
    if (more) $(list).append(...items);
    else $(list).replaceChildren(...items);
    next = data.next;
    $(older).hidden = next === null;
    $(empty).hidden = $(list).childElementCount > 0;
  };
  $(older).addEventListener('click', () => load(true));
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
  $('moderation-blocked').textContent = blockedAt ? `Requests are refused since ${blockedAt}: too many were refused by moderation. Ask the operator to review them.` : '';
  $('moderation-refusals').replaceChildren(
    ...refusals.map((r) => {
      const li = document.createElement('li');
      li.textContent = `${r.createdAt}: ${r.operation}, ${r.field} refused (${r.categories.join(', ')})`;
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

function fact(list: HTMLElement, term: string, value: string): void {
  const dt = document.createElement('dt');
  dt.textContent = term;
  const dd = document.createElement('dd');
  dd.textContent = value;
  list.append(dt, dd);
}

/** One key in the list: its facts and, unless revoked, a revoke button that asks to be confirmed. */
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
  fact(facts, 'Expires', key.expiresAt ?? 'never');
  fact(facts, 'Created', key.createdAt);
  fact(facts, 'Last used', key.lastUsedAt ?? 'never');
  if (key.revokedAt) fact(facts, 'Revoked', key.revokedAt);
  li.append(title, facts);
  if (!key.revokedAt) li.append(revokeButton(key));
  return li;
}

function revokeButton(key: Key): HTMLElement {
  const box = document.createElement('div');
  const ask = document.createElement('button');
  ask.type = 'button';
  ask.textContent = `Revoke ${key.name}`;
  ask.addEventListener('click', () => {
    const confirm = document.createElement('button');
    confirm.type = 'button';
    confirm.className = 'danger';
    confirm.textContent = `Yes, revoke ${key.name} now`;
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.textContent = 'Keep it';
    cancel.addEventListener('click', () => box.replaceChildren(ask));
    confirm.addEventListener('click', async () => {
      const { error } = await api.DELETE('/keys/{keyId}', { params: { path: { keyId: key.id } } });
      problem(error ?? null);
      if (!error) say(`Key ${key.name} is revoked.`);
      await loadKeys();
    });
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

$('sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target as HTMLFormElement);
  const { data, error } = await api.POST('/session', { body: { email: String(form.get('email')), password: String(form.get('password')) } });
  problem(error ?? null);
  if (!data) return;
  csrfToken = data.csrfToken;
  $<HTMLInputElement>('sign-in-password').value = '';
  say(`Signed in as ${data.email}.`);
  await signedIn();
});

$('invite-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target as HTMLFormElement);
  const password = String(form.get('password'));
  if (password !== String(form.get('confirm'))) return problem('The two passwords differ.');
  if (!/\S/.test(password)) return problem('The password must not be only spaces.');
  const { data, error } = await api.POST('/invites/accept', { body: { token: inviteToken() ?? '', password } });
  problem(error ?? null);
  if (!data) return;
  history.replaceState(null, '', location.pathname); // the token is spent: out of the address bar
  csrfToken = data.csrfToken;
  say(`Welcome, ${data.email}.`);
  await signedIn();
});

$('create-key-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const formElement = event.target as HTMLFormElement;
  const form = new FormData(formElement);
  const expires = String(form.get('expires') ?? '');
  const cap = String(form.get('cap') ?? '');
  const { data, error } = await api.POST('/keys', {
    body: {
      name: String(form.get('name')),
      scopes: form.getAll('scope').map(String) as Key['scopes'],
      ...(expires && { expiresAt: new Date(`${expires}Z`).toISOString() }),
      ...(cap && { monthlyCap: Number(cap) }),
    },
  });
  problem(error ?? null);
  if (!data) return;
  formElement.reset();
  $('new-secret').hidden = false;
  $<HTMLInputElement>('new-secret-value').value = data.secret;
  $('copy-secret').focus();
  say(`Key ${data.key.name} is created.`);
  await loadKeys();
});

$('copy-secret').addEventListener('click', async () => {
  const field = $<HTMLInputElement>('new-secret-value');
  try {
    await navigator.clipboard.writeText(field.value);
    say('The secret is copied.');
  } catch {
    field.select(); // no clipboard permission (plain http): selected for Ctrl+C
    say('Select and copy the secret with Ctrl+C.');
  }
});

$('secret-done').addEventListener('click', () => {
  $<HTMLInputElement>('new-secret-value').value = '';
  $('new-secret').hidden = true;
});

/** Changes a setting of the account; the page shows what the server now holds. */
async function patchAccount(body: { paidConsent?: boolean; contentPreference?: Account['contentPreference'] }, done: string): Promise<void> {
  const { data, error } = await api.PATCH('/account', { body });
  problem(error ?? null);
  if (!data) return void (await loadAccount());
  showAccount(data);
  say(done);
}

$('paid-consent').addEventListener('change', (event) => {
  const paidConsent = (event.target as HTMLInputElement).checked;
  return patchAccount({ paidConsent }, paidConsent ? 'Paid Gems may now be spent.' : 'Paid Gems will not be spent.');
});

$('content-preference').addEventListener('change', (event) => {
  const contentPreference = (event.target as HTMLSelectElement).value as Account['contentPreference'];
  return patchAccount({ contentPreference }, `The content preference is ${contentPreference}.`);
});

async function leave(path: '/session' | '/sessions'): Promise<void> {
  const { error } = await api.DELETE(path);
  problem(error ?? null);
  csrfToken = '';
  say(path === '/sessions' ? 'Signed out everywhere.' : 'Signed out.');
  show('sign-in-view');
}
$('sign-out').addEventListener('click', () => leave('/session'));
$('sign-out-everywhere').addEventListener('click', () => leave('/sessions'));

if (inviteToken()) show('invite-view');
else if (await loadAccount()) await signedIn();
