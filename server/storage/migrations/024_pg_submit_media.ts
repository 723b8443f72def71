import type { Knex } from 'knex';

/**
 * Postgres only: a new media submission's writes as one statement (storage/procedures.ts
 * `submitMediaAtOnce`), the counterpart of migration 021's view on SQLite. `SELECT
 * gemforge_submit_media($1, …)`, prepared once per connection by name and bound with the
 * rows' values, runs this function, which makes in one statement, so one round trip and its
 * own transaction (autocommit), the writes of the at-commit batch in that batch's order
 * (engine/pg-deferred.ts; domain/tasks.ts `submitMedia`): the claim of the identity (a claim
 * made before fails on the primary key, before anything else), the reservation and its hold
 * entry, the task and its outputs (a JSON array), then, in the lock order of balances.ts
 * "Locking", the hold's guarded moves of the account's paid balance and the key's pending
 * Gems (balances.ts `guardHold`'s statements), the admission's tokens (rate-buckets.ts
 * `guardTokens`' take, when the request has buckets: a JSON array of them, and the queued
 * media cap when it has one) and the job (whose trigger takes the account's queue turn,
 * migration 017). A refused guard raises what `gemforge_guard()` raises (migration 011:
 * SQLSTATE GF001, the guard's words), so the caller tells a refusal as before; any failure
 * undoes the whole statement.
 *
 * The function's statements are planned once per connection (PL/pgSQL keeps their plans),
 * and the values are bound, never SQL text: where the batch of EXECUTEs with the values
 * written in as literals was parsed on every request, this is parsed once per connection.
 *
 * The rows' values are the caller's, built by the step-by-step path's own code; only the
 * guards' conditions, the moves and the token take are written here a second time, and
 * test/submit-at-once.test.ts makes both paths write the same rows (rate buckets included).
 */
export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect === 'sqlite3') return;
  // The refill of rate-buckets.ts `takeSql`: tokens at the request's time, never above the burst.
  const refilled = 'least(excluded.burst, rate_buckets.tokens + greatest(0, excluded.at_ms - rate_buckets.at_ms) * excluded.rate / 1000.0)';
  await db.raw(`
    CREATE FUNCTION gemforge_submit_media(
      p_account_id text, p_key_id text, p_reservation_id text, p_task_id text,
      p_claimed_at text, p_held_at text, p_created_at text, p_month text, p_hold_allowance bigint, p_hold_paid bigint,
      p_record_idem_key text, p_record_operation text, p_record_fingerprint text, p_record_state text,
      p_record_response_status integer, p_record_response_body text,
      p_reservation_purpose text, p_reservation_kind text, p_reservation_ref text, p_reservation_state text,
      p_reservation_charged bigint, p_reservation_released bigint, p_reservation_settled_at text,
      p_entry_type text, p_entry_note text,
      p_task_kind text, p_task_model text, p_task_request text, p_task_status text,
      p_task_error_code text, p_task_error_message text, p_task_finished_at text,
      p_job_state text, p_job_attempts integer, p_job_lane text,
      p_outputs jsonb, p_buckets jsonb, p_cap_account_id text, p_cap integer
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      changed integer;
    BEGIN
      INSERT INTO idempotency_records (key_id, idem_key, account_id, operation, fingerprint, state, ref, reservation_id,
          response_status, response_body, created_at, updated_at)
        VALUES (p_key_id, p_record_idem_key, p_account_id, p_record_operation, p_record_fingerprint, p_record_state, p_task_id,
          p_reservation_id, p_record_response_status, p_record_response_body, p_claimed_at, p_claimed_at);
      INSERT INTO reservations (id, account_id, key_id, purpose, kind, ref, hold_allowance, hold_paid, state, charged, released,
          month, created_at, settled_at)
        VALUES (p_reservation_id, p_account_id, p_key_id, p_reservation_purpose, p_reservation_kind, p_reservation_ref,
          p_hold_allowance, p_hold_paid, p_reservation_state, p_reservation_charged, p_reservation_released, p_month, p_held_at,
          p_reservation_settled_at);
      INSERT INTO ledger_entries (account_id, key_id, reservation_id, type, allowance, paid, month, created_at, note)
        VALUES (p_account_id, p_key_id, p_reservation_id, p_entry_type, p_hold_allowance, p_hold_paid, p_month, p_held_at, p_entry_note);
      INSERT INTO tasks (id, account_id, key_id, kind, model, request, status, reservation_id, error_code, error_message,
          created_at, updated_at, finished_at)
        VALUES (p_task_id, p_account_id, p_key_id, p_task_kind, p_task_model, p_task_request, p_task_status, p_reservation_id,
          p_task_error_code, p_task_error_message, p_created_at, p_created_at, p_task_finished_at);
      INSERT INTO task_outputs (task_id, idx, status, price, asset_id, error)
        SELECT p_task_id, o.idx, o.status, o.price, o.asset_id, o.error
        FROM jsonb_to_recordset(p_outputs) AS o(idx integer, status text, price bigint, asset_id text, error text);
      UPDATE account_balances SET paid_pending = paid_pending + p_hold_paid
        WHERE account_id = p_account_id AND credited - paid_pending - paid_posted >= p_hold_paid;
      GET DIAGNOSTICS changed = ROW_COUNT;
      PERFORM gemforge_guard(changed = 1, 'account balance');
      IF p_key_id IS NOT NULL THEN
        UPDATE key_balances AS kb SET pending = kb.pending + p_hold_paid
          FROM api_keys AS k LEFT JOIN key_months AS km ON km.key_id = k.id AND km.month = p_month
          WHERE kb.key_id = p_key_id AND k.id = kb.key_id
            AND (k.monthly_cap IS NULL OR (k.monthly_cap > 0 AND kb.pending + COALESCE(km.posted, 0) + p_hold_paid <= k.monthly_cap));
        GET DIAGNOSTICS changed = ROW_COUNT;
        PERFORM gemforge_guard(changed = 1, 'key cap');
      END IF;
      IF jsonb_array_length(p_buckets) > 0 THEN
        WITH took AS (
          INSERT INTO rate_buckets (id, tokens, at_ms, rate, burst)
            SELECT b.id, b.tokens, b.at_ms, b.rate, b.burst
            FROM jsonb_to_recordset(p_buckets) AS b(id text, tokens double precision, at_ms bigint, rate double precision, burst double precision)
            WHERE p_cap IS NULL
              OR (SELECT COALESCE(SUM(queued), 0) FROM queue_turns WHERE account_id = p_cap_account_id AND lane IN ('local', 'remote')) < p_cap
          ON CONFLICT (id) DO UPDATE SET tokens = ${refilled} - 1, at_ms = greatest(rate_buckets.at_ms, excluded.at_ms),
            rate = excluded.rate, burst = excluded.burst
            WHERE ${refilled} >= 1
          RETURNING 1)
        SELECT count(*) INTO changed FROM took;
        PERFORM gemforge_guard(changed = jsonb_array_length(p_buckets), 'request rate');
      END IF;
      INSERT INTO jobs (task_id, account_id, state, attempts, run_at, created_at, updated_at, lane)
        VALUES (p_task_id, p_account_id, p_job_state, p_job_attempts, p_created_at, p_created_at, p_created_at, p_job_lane);
      RETURN true;
    END
    $$`);
}
