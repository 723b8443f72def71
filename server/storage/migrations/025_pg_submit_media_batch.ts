import type { Knex } from 'knex';

/**
 * Postgres only: several new media submissions of one account in one statement, one transaction and one
 * commit (storage/procedure-batches.ts gathers them; storage/procedures.ts `submitMediaAtOnce`).
 * `gemforge_submit_media_batch($1)` takes a JSON array of items, each the array of
 * `gemforge_submit_media`'s (migration 024) arguments in its order, and calls that function for each
 * item in the array's order, each in its own BEGIN … EXCEPTION block: a subtransaction, so an item
 * that fails (a guard's refusal, a claim made before, anything else) undoes its own writes alone and
 * the next item runs as if it had not been tried. Each item's guards see the balances, caps and tokens
 * the items before it left, as consecutive single calls would. The writes themselves stay written once,
 * in migration 024's function, in balances.ts's lock order (the account's row first).
 *
 * It answers one row: `states[i]` null where item i was written, else the SQLSTATE it failed with, and
 * `messages[i]` that error's message (a guard's words for GF001), so the caller raises for each item
 * what the single call would have raised.
 */
const ARGUMENTS = [
  'text', // account_id
  'text', // key_id
  'text', // reservation_id
  'text', // task_id
  'text', // claimed_at
  'text', // held_at
  'text', // created_at
  'text', // month
  'bigint', // hold_allowance
  'bigint', // hold_paid
  'text', // record_idem_key
  'text', // record_operation
  'text', // record_fingerprint
  'text', // record_state
  'integer', // record_response_status
  'text', // record_response_body
  'text', // reservation_purpose
  'text', // reservation_kind
  'text', // reservation_ref
  'text', // reservation_state
  'bigint', // reservation_charged
  'bigint', // reservation_released
  'text', // reservation_settled_at
  'text', // entry_type
  'text', // entry_note
  'text', // task_kind
  'text', // task_model
  'text', // task_request
  'text', // task_status
  'text', // task_error_code
  'text', // task_error_message
  'text', // task_finished_at
  'text', // job_state
  'integer', // job_attempts
  'text', // job_lane
  'jsonb', // outputs
  'jsonb', // buckets
  'text', // cap_account_id
  'integer', // cap
] as const;

export async function up(db: Knex): Promise<void> {
  if ((db.client as { dialect?: string }).dialect === 'sqlite3') return;
  // `->>` gives each element as text (a JSON string's contents, a number's digits, NULL for null): cast to the argument's type.
  const args = ARGUMENTS.map((type, i) => `(item ->> ${i})::${type}`).join(', ');
  await db.raw(`
    CREATE FUNCTION gemforge_submit_media_batch(p_items jsonb, OUT states text[], OUT messages text[])
    LANGUAGE plpgsql AS $$
    DECLARE
      item jsonb;
    BEGIN
      states := '{}';
      messages := '{}';
      FOR i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        item := p_items -> i;
        BEGIN
          IF jsonb_array_length(item) <> ${ARGUMENTS.length} THEN
            RAISE EXCEPTION 'gemforge_submit_media_batch: an item of % values, not ${ARGUMENTS.length}', jsonb_array_length(item);
          END IF;
          PERFORM gemforge_submit_media(${args});
          states := array_append(states, NULL);
          messages := array_append(messages, NULL);
        EXCEPTION WHEN OTHERS THEN
          states := array_append(states, SQLSTATE);
          messages := array_append(messages, SQLERRM);
        END;
      END LOOP;
    END
    $$`);
}
