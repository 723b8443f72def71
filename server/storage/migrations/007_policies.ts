import type { Knex } from 'knex';

/**
 * Account policies. The per-account settings are columns of the
 * `accounts` row, which authentication already loads, so checking them costs no
 * extra statement: the content preference, the network allow and deny lists and
 * the blocked regions (JSON arrays as text; null = none), the rule for addresses
 * of unknown region, and when a moderation threshold blocked the account (so
 * `admin moderation clear` lifts only a block moderation set). Moderation
 * refusals are rows of their own, counted per account.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('accounts', (t) => {
    t.string('content_preference', 16).notNullable().defaultTo('standard'); // standard | strict
    t.text('network_allow'); // JSON array of CIDR ranges; null or [] = every address
    t.text('network_deny'); // JSON array of CIDR ranges
    t.text('blocked_regions'); // JSON array of region codes
    t.string('unknown_region', 8).notNullable().defaultTo('allow'); // allow | block
    t.string('moderation_blocked_at', 32); // set when repeated refusals blocked the account
  });
  await db.schema.createTable('moderation_records', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('key_id', 64).notNullable();
    t.string('operation', 64).notNullable(); // contract operationId, e.g. createImage
    t.string('field', 200).notNullable(); // where the refused text was, e.g. messages[1].content
    t.string('categories', 500).notNullable(); // JSON array of category ids
    t.string('provider', 64).notNullable(); // embedded | openai-compatible
    t.string('created_at', 32).notNullable();
    t.string('cleared_at', 32); // set by `admin moderation clear`
    t.index(['account_id', 'created_at']);
  });
}
