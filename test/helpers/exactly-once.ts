/**
 * The exactly-once checks every spending endpoint gets (issue: Gems and
 * idempotency): many simultaneous requests with one identity cause one
 * dispatch and one reservation; the others replay or answer REQUEST_UNCERTAIN.
 * A later endpoint adds one call of `assertOneIdentityRace`.
 */
import assert from 'node:assert/strict';
import type { Db } from '../../server/storage/db.ts';

export interface RaceResult {
  /** Responses by status. */
  statuses: Record<number, number>;
  /** Parsed JSON bodies (streams are read to the end as text). */
  bodies: Array<{ status: number; body: unknown }>;
}

/** Fires `n` identical requests with one Idempotency-Key at once. */
export async function raceOneIdentity(url: string, path: string, key: string, idemKey: string, body: unknown, n = 100): Promise<RaceResult> {
  const results = await Promise.all(
    Array.from({ length: n }, async () => {
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idemKey },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // a stream: keep its text
      }
      return { status: res.status, body: parsed };
    }),
  );
  const statuses: Record<number, number> = {};
  for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  return { statuses, bodies: results };
}

/**
 * Races `n` requests of one identity and asserts: exactly one reservation was
 * made for the account, every response is a success (the first or a replay) or
 * 409 REQUEST_UNCERTAIN, and nothing else.
 */
export async function assertOneIdentityRace(
  db: Db,
  options: { url: string; path: string; key: string; idemKey: string; body: unknown; accountId: string; n?: number; successStatuses?: number[] },
): Promise<RaceResult> {
  const before = (await db('reservations').where({ account_id: options.accountId })).length;
  const result = await raceOneIdentity(options.url, options.path, options.key, options.idemKey, options.body, options.n ?? 100);
  const ok = options.successStatuses ?? [200, 202];
  for (const r of result.bodies) {
    if (ok.includes(r.status)) continue;
    assert.equal(r.status, 409, `unexpected ${r.status}: ${JSON.stringify(r.body).slice(0, 200)}`);
    assert.equal((r.body as { error: { code: string } }).error.code, 'REQUEST_UNCERTAIN');
  }
  const after = (await db('reservations').where({ account_id: options.accountId })).length;
  assert.equal(after - before, 1, 'exactly one reservation for one identity');
  return result;
}
