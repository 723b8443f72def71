/**
 * sharp, loaded at its first call: libvips adds ~20 MB resident and a few
 * hundred milliseconds to a start, and a server that only forwards text never
 * decodes an image. Every module that decodes or encodes pictures calls this
 * `sharp` (the package's own function, with its settings applied once).
 */
import { createRequire } from 'node:module';
import type SharpModule from 'sharp';

let loaded: typeof SharpModule | undefined;

function load(): typeof SharpModule {
  const s = createRequire(import.meta.url)('sharp') as typeof SharpModule;
  // libvips' operation cache kept every decoded frame it had seen (within its 50 MB
  // "limit", which does not count them): ten 40-megapixel progressive JPEGs decoded
  // one after another left 810 MiB resident, against 120 MiB without it. Nothing
  // here decodes the same input twice, so the cache buys nothing.
  s.cache(false);
  return s;
}

/** sharp(input, options): the package's constructor, loaded on the first call. */
export const sharp = ((...args: Parameters<typeof SharpModule>) => (loaded ??= load())(...args)) as typeof SharpModule;
