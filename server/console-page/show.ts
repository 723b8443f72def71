/**
 * How the console page says things: moments in the reader's local time (the
 * UTC moment on hover), and a form's problems where the person is looking, in
 * the console's own words rather than the API validator's.
 */

type Problem = { error?: { code?: string; message?: string } } | undefined;

const local = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** A moment as a `<time>`: local date and time to read, the exact UTC moment in `datetime` and on hover. */
export function when(iso: string): HTMLTimeElement {
  const time = document.createElement('time');
  const at = new Date(iso);
  time.dateTime = iso;
  time.textContent = local.format(at);
  time.title = `${at
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, '')} UTC`;
  return time;
}

/**
 * The console's words for a field the API refused, by the field's name in the
 * request body: what the person should do, never the validator's JSON path.
 */
const FIELD_WORDS: Readonly<Record<string, string>> = {
  name: 'Give the key a name of 1 to 200 characters.',
  monthlyCap: 'The monthly cap is a whole number of Gems, 0 or more (0 disables spending); leave it empty for no cap.',
  expiresAt: 'The expiry must be a date and time in the future; leave it empty for a key that does not expire.',
  scopes: 'Choose at least one scope.',
  email: 'Enter the email address of your login.',
  password: 'Choose a password of 12 to 256 characters, not only spaces.',
};

/** Which request field an API error is about, when its message names one (`body.monthlyCap …`). */
function fieldOf(message: string): string | undefined {
  const named = /\bbody\.([A-Za-z]+)/.exec(message)?.[1];
  return named && Object.hasOwn(FIELD_WORDS, named) ? named : undefined;
}

/** An API error in the console's words, and the request field it is about when it names one. */
export function wordsFor(error: Problem): { text: string; field?: string } {
  const message = error?.error?.message ?? 'Something went wrong; try again.';
  if (error?.error?.code === 'INVALID_REQUEST') {
    const field = fieldOf(message);
    if (field) return { text: FIELD_WORDS[field]!, field };
  }
  return { text: message };
}

/**
 * A form's problem box: shown next to the form, scrolled into view and the
 * field at fault focused; cleared as soon as the person changes any field of
 * the form (the problem may be fixed), or by `clear()`.
 */
export function problemBox(form: HTMLElement, box: HTMLElement) {
  const clear = () => {
    box.textContent = '';
    box.hidden = true;
    for (const f of form.querySelectorAll('[aria-invalid]')) f.removeAttribute('aria-invalid');
  };
  form.addEventListener('input', clear);
  form.addEventListener('change', clear);
  /** Shows `text`; `field` (a control of the form) is marked invalid and focused, else the box takes the view. */
  const show = (text: string, field?: HTMLElement | null) => {
    box.textContent = text;
    box.hidden = false;
    box.scrollIntoView({ block: 'center' });
    if (field) {
      field.setAttribute('aria-invalid', 'true');
      field.setAttribute('aria-describedby', box.id);
      field.focus({ preventScroll: true });
    } else {
      box.focus({ preventScroll: true });
    }
  };
  /** Shows an API error (or hides the box when there is none); `fields` maps request fields to the form's controls. */
  const api = (error: Problem | null, fields: Readonly<Record<string, HTMLElement | null>> = {}) => {
    if (!error) return clear();
    const { text, field } = wordsFor(error);
    show(text, field ? fields[field] : undefined);
  };
  return { show, api, clear };
}
