/**
 * Idempotency-Key identities: one per logical operation, generated once and
 * reused on every retry of it (spec, "Idempotency rules"). Browser-safe: the
 * Web Crypto `randomUUID` exists in Node ≥ 19 and every current browser.
 */

/** The contract's pattern for `Idempotency-Key`. */
export const IDEMPOTENCY_KEY_PATTERN = /^[a-zA-Z0-9_.:-]{1,128}$/;

/** A fresh identity such as `gf-3b241101-e2bb-4255-8caf-4136c566a962`. */
export function newIdempotencyKey(prefix = 'gf'): string {
  const key = `${prefix}-${globalThis.crypto.randomUUID()}`;
  assertIdempotencyKey(key);
  return key;
}

/** Throws a TypeError when `key` does not match the contract's pattern (so it never reaches the server). */
export function assertIdempotencyKey(key: string): void {
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new TypeError(`Idempotency-Key must be 1–128 characters from letters, digits, "_", ".", ":", "-" (got ${JSON.stringify(key)})`);
  }
}
