/**
 * The client in a browser: a bundle made by esbuild for `platform: 'browser'`
 * (an IIFE that sets the global `gemforge`), and a `node:vm` context with only
 * web globals (no process, require or Buffer) to run it in.
 */
import assert from 'node:assert/strict';
import vm from 'node:vm';
import { build } from 'esbuild';

/** Bundles `contents` (resolved from `dir`) for the browser; fails when any Node built-in is pulled in. Returns the code and the inputs. */
export async function bundleForBrowser(contents: string, dir: string): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    stdin: { contents, resolveDir: dir, loader: 'ts', sourcefile: 'entry.ts' },
    absWorkingDir: dir,
    bundle: true,
    platform: 'browser',
    format: 'iife',
    globalName: 'gemforge',
    write: false,
    logLevel: 'silent',
    metafile: true,
  });
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(
    inputs.every((i) => !i.startsWith('node:')),
    inputs.join(', '),
  );
  return { code: result.outputFiles[0].text, inputs };
}

export function browserContext(extra: Record<string, unknown> = {}): vm.Context {
  return vm.createContext({
    crypto: globalThis.crypto,
    fetch,
    Request,
    Response,
    Headers,
    FormData,
    Blob,
    ReadableStream,
    TextDecoder,
    TextEncoder,
    AbortController,
    URL,
    URLSearchParams,
    setTimeout,
    clearTimeout,
    ...extra,
  });
}
