import crypto from 'node:crypto';

/** A new opaque ID such as `acct_3f9c…`: a type prefix and 96 random bits. */
export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(12).toString('hex')}`;
}
