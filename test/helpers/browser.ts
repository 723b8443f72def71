/** A browser-like place to run a bundle: a `node:vm` context with only web globals (no process, require or Buffer). */
import vm from 'node:vm';

export function browserContext(extra: Record<string, unknown> = {}): vm.Context {
  return vm.createContext({
    crypto: globalThis.crypto, fetch, Request, Response, Headers, FormData, Blob, ReadableStream, TextDecoder, TextEncoder,
    AbortController, URL, URLSearchParams, setTimeout, clearTimeout, ...extra,
  });
}
