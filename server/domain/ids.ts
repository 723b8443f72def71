import crypto from 'node:crypto';

/**
 * Random bytes for ids, drawn from the CSPRNG 4 KB at a time (as Node does for
 * `crypto.randomUUID`): a submission makes several ids, and a call to
 * `randomBytes` per id was about 1 % of its CPU (issue 13). Each byte is used once.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** `bytes` random bytes as hex, from the pool. */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    pool = crypto.randomBytes(POOL_BYTES);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}

/** A new opaque ID such as `acct_3f9c…`: a type prefix and 96 random bits. */
export function newId(prefix: string): string {
  return `${prefix}_${randomHex(12)}`;
}
