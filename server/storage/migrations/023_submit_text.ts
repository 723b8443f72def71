import type { Knex } from 'knex';

/**
 * SQLite only: a chat completion's reservation as one statement (storage/procedures.ts
 * `submitTextAtOnce`). `INSERT INTO submit_text (…) VALUES (…)` stores nothing in the view;
 * its INSTEAD OF INSERT trigger makes, in the order the step-by-step path makes them
 * (domain/text.ts `submit` with the admission at the claim):
 *
 * - the admission's token take: one token from each bucket of `buckets` (a JSON array of
 *   the rows storage/rate-buckets.ts `takeTokensAtClaim` binds), refilled and taken by the
 *   same upsert; every bucket must give one (`rate bucket without a token`);
 * - the claim of the identity (its record: a claim made before fails on the primary key);
 * - the account's and the key's balance rows where they have none yet (an account never credited, a key older
 *   than its row), as `lockFigures` makes them when its read finds none (balances.ts `ensureRows`);
 * - the reservation, its split decided here from the figures ledger.ts `reserveTx` reads
 *   (storage/balances.ts `lockFigures`): the allowance left this month (the account's
 *   allowance less what its month posted and what it holds, never below 0) covers what it
 *   can of `amount`, paid Gems the rest; made only when no paid Gems are needed or the
 *   account consented to them, and its paid balance covers them (`llm hold`);
 * - the moves `balances.move` makes for it: the account's pending figures, and the key's
 *   pending Gems under the key's cap as a media hold's guard holds it (migration 021:
 *   `key cap`);
 * - its hold entry.
 *
 * A refusal raises `gemforge_guard: <what>` as migration 020's guards do, and like any other
 * failure undoes the whole statement (its own transaction): tokens, claim and hold. The caller
 * then takes the step-by-step path, which answers as it always did (the rule that refused
 * named, a claim made before replayed, a replay never refused by a rate). The caller reads the
 * split back from the statement's RETURNING (its subqueries see the trigger's writes), which
 * the settlement needs.
 *
 * The rows' values are the caller's, built by the code that builds the step-by-step path's rows;
 * only the rules and the moves are written here a second time, and test/submit-text-at-once.test.ts
 * makes both paths write the same rows.
 */
const RECORD: Array<[string, string]> = [
  ['key_id', 'key_id'],
  ['idem_key', 'record_idem_key'],
  ['account_id', 'account_id'],
  ['operation', 'record_operation'],
  ['fingerprint', 'record_fingerprint'],
  ['state', 'record_state'],
  ['ref', 'completion_id'],
  ['reservation_id', 'reservation_id'],
  ['response_status', 'record_response_status'],
  ['response_body', 'record_response_body'],
  ['created_at', 'claimed_at'],
  ['updated_at', 'claimed_at'],
];
/** The reservation's columns but its split (decided by the trigger). */
const RESERVATION: Array<[string, string]> = [
  ['id', 'reservation_id'],
  ['account_id', 'account_id'],
  ['key_id', 'key_id'],
  ['purpose', 'reservation_purpose'],
  ['kind', 'reservation_kind'],
  ['ref', 'completion_id'],
  ['state', 'reservation_state'],
  ['charged', 'reservation_charged'],
  ['released', 'reservation_released'],
  ['month', 'month'],
  ['created_at', 'held_at'],
  ['settled_at', 'reservation_settled_at'],
];
/** The entry's columns but its amounts (the reservation's split). */
const ENTRY: Array<[string, string]> = [
  ['account_id', 'account_id'],
  ['key_id', 'key_id'],
  ['reservation_id', 'reservation_id'],
  ['type', 'entry_type'],
  ['month', 'month'],
  ['created_at', 'held_at'],
  ['note', 'entry_note'],
];
const BUCKET = ['id', 'tokens', 'at_ms', 'rate', 'burst'];

/** storage/rate-buckets.ts `refilled`, SQLite's spelling: the bucket's tokens at the request's time. */
const refilled = `min(excluded.burst, rate_buckets.tokens + max(0, excluded.at_ms - rate_buckets.at_ms) * excluded.rate / 1000.0)`;

export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect !== 'sqlite3') return;
  const columns = [...new Set([RECORD, RESERVATION, ENTRY].flatMap((table) => table.map(([, from]) => from))), 'amount', 'buckets'];
  await db.raw(`CREATE VIEW submit_text AS SELECT ${columns.map((c) => `NULL AS ${c}`).join(', ')} WHERE 0`);
  // The figures of ledger.ts `reserveTx` (balances.ts `lockFigures`), each absent figure 0 as `num` reads it.
  const figures = `SELECT min(max(0, COALESCE(a.llm_allowance, 0) - (COALESCE(am.allowance_posted, 0) + COALESCE(ab.allowance_pending, 0))), NEW.amount) AS allowance,
          COALESCE(ab.credited, 0) - COALESCE(ab.paid_pending, 0) - COALESCE(ab.paid_posted, 0) AS balance, a.paid_consent AS consent
        FROM account_balances AS ab JOIN accounts AS a ON a.id = ab.account_id
          LEFT JOIN account_months AS am ON am.account_id = ab.account_id AND am.month = NEW.month
        WHERE ab.account_id = NEW.account_id`;
  await db.raw(`
    CREATE TRIGGER submit_text_insert INSTEAD OF INSERT ON submit_text
    BEGIN
      INSERT INTO rate_buckets (${BUCKET.join(', ')}) SELECT ${BUCKET.map((c) => `b.value ->> '${c}'`).join(', ')} FROM json_each(NEW.buckets) AS b WHERE true
        ON CONFLICT (id) DO UPDATE SET tokens = ${refilled} - 1, at_ms = max(rate_buckets.at_ms, excluded.at_ms), rate = excluded.rate, burst = excluded.burst
        WHERE ${refilled} >= 1;
      SELECT RAISE(ABORT, 'gemforge_guard: rate bucket without a token') WHERE changes() <> json_array_length(NEW.buckets);
      INSERT INTO idempotency_records (${RECORD.map(([c]) => c).join(', ')}) VALUES (${RECORD.map(([, from]) => `NEW.${from}`).join(', ')});
      INSERT INTO account_balances (account_id) VALUES (NEW.account_id) ON CONFLICT (account_id) DO NOTHING;
      INSERT INTO key_balances (key_id) SELECT NEW.key_id WHERE NEW.key_id IS NOT NULL ON CONFLICT (key_id) DO NOTHING;
      INSERT INTO reservations (${RESERVATION.map(([c]) => c).join(', ')}, hold_allowance, hold_paid)
        SELECT ${RESERVATION.map(([, from]) => `NEW.${from}`).join(', ')}, f.allowance, NEW.amount - f.allowance FROM (${figures}) AS f
        WHERE (NEW.amount - f.allowance = 0 OR f.consent) AND NEW.amount - f.allowance <= f.balance;
      SELECT RAISE(ABORT, 'gemforge_guard: llm hold') WHERE changes() <> 1;
      UPDATE account_balances SET paid_pending = paid_pending + r.hold_paid, allowance_pending = allowance_pending + r.hold_allowance
        FROM reservations AS r WHERE r.id = NEW.reservation_id AND account_balances.account_id = NEW.account_id;
      UPDATE key_balances SET pending = pending + NEW.amount
        WHERE key_id = NEW.key_id AND EXISTS (SELECT 1 FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = NEW.month
          WHERE k.id = key_balances.key_id AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND key_balances.pending + COALESCE(km.posted, 0) + NEW.amount <= k.monthly_cap)));
      SELECT RAISE(ABORT, 'gemforge_guard: key cap') WHERE NEW.key_id IS NOT NULL AND changes() <> 1;
      INSERT INTO ledger_entries (${ENTRY.map(([c]) => c).join(', ')}, allowance, paid)
        SELECT ${ENTRY.map(([, from]) => `NEW.${from}`).join(', ')}, r.hold_allowance, r.hold_paid FROM reservations AS r WHERE r.id = NEW.reservation_id;
    END`);
}
