/** Seeded randomness for the local generators: the same inputs always give the same picture or sound. */
import crypto from 'node:crypto';

/** A small seeded PRNG (mulberry32), uniform in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit seed from any inputs. */
export function seedOf(...parts: Array<string | number | null | undefined>): number {
  return crypto
    .createHash('sha256')
    .update(parts.map((p) => String(p ?? '')).join('\u0000'))
    .digest()
    .readUInt32LE(0);
}
