/**
 * The fetch orval's generated functions call (its `override.mutator`): the
 * generated code writes paths relative to the server, so this adds the base URL
 * and the bearer key, and answers in the shape the generated functions return
 * (`{ data, status, headers }`, the body parsed as JSON, or as bytes for a
 * download). docs/client-and-cli.md shows the same for users.
 */
let base = '';
let bearer = '';

/** Where the generated calls go, and with which key. */
export function configure(baseUrl: string, apiKey: string): void {
  base = baseUrl;
  bearer = apiKey;
}

export async function orvalFetch<T>(url: string, init: RequestInit): Promise<T> {
  const headers = new Headers(init.headers);
  // A signed download URL is absolute and carries its own authorization.
  const absolute = /^https?:\/\//.test(url);
  if (!absolute && !headers.has('authorization')) headers.set('authorization', `Bearer ${bearer}`);
  const res = await fetch(absolute ? url : `${base}${url}`, { ...init, headers });
  const type = res.headers.get('content-type') ?? '';
  const data = type.startsWith('application/json') ? await res.json() : new Uint8Array(await res.arrayBuffer());
  return { data, status: res.status, headers: res.headers } as T;
}
