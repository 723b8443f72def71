import crypto from 'node:crypto';

/**
 * Random bytes for ids, drawn from the CSPRNG 4 KB at a time (as Node does for
 * `crypto.randomUUID`): a submission makes several ids, and a call to
 * `randomBytes` per id was about 1 % of its CPU. Each byte is used once.
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

/**
 * How many ids a millisecond has room for in an id's first 48 bits
 * (milliseconds times this: enough until the year 2109); a burst of more
 * borrows from the next milliseconds, so the count runs ahead of the clock
 * for a moment and the order holds.
 */
const PER_MS = 64;
/** The first 48 bits of this process's last id. */
let lastOrder = 0;

/**
 * A new opaque ID such as `task_68b2c1d3e4f07a9c…`: a type prefix, then 12 hex
 * digits that grow with time (milliseconds since 1970 times 64, plus a
 * counter, so this process's ids sort in the order they were made and no two
 * share them), then 48 random bits (ids of several processes in one
 * millisecond stay apart). Ordered ids make a new row's id the last of its
 * indexes: inserts append to the same few pages instead of landing at random
 * in ever larger indexes, which keeps the pages a commit writes and a checkpoint
 * copies few as the tables grow. Creation times are visible in ids
 * to a millisecond, as they are in the objects' `createdAt`.
 */
export function newId(prefix: string): string {
  lastOrder = Math.max(lastOrder + 1, Date.now() * PER_MS);
  return `${prefix}_${lastOrder.toString(16).padStart(12, '0')}${randomHex(6)}`;
}
