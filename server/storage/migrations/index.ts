/**
 * Numbered, forward-only migrations: a landed migration is never edited, only followed. Each runs in its own
 * transaction (knex's default). Add a file, append it here; never edit a landed one.
 */
import type { Knex } from 'knex';
import * as m001 from './001_accounts_keys.ts';
import * as m002 from './002_ledger.ts';
import * as m003 from './003_assets_voices.ts';
import * as m004 from './004_idempotency.ts';
import * as m005 from './005_tasks.ts';
import * as m006 from './006_balances.ts';
import * as m007 from './007_policies.ts';
import * as m008 from './008_job_attempts.ts';
import * as m009 from './009_remote_calls.ts';
import * as m010 from './010_signing_keys.ts';
import * as m011 from './011_hold_guard.ts';
import * as m012 from './012_blob_pins.ts';
import * as m013 from './013_console_logins.ts';
import * as m014 from './014_key_last_used.ts';
import * as m015 from './015_console_known_addresses.ts';
import * as m016 from './016_account_days.ts';
import * as m017 from './017_fair_share.ts';
import * as m018 from './018_upstream_breakers.ts';
import * as m019 from './019_job_store_retries.ts';
import * as m020 from './020_sqlite_guards.ts';
import * as m021 from './021_submit_media.ts';
import * as m022 from './022_settle_completion.ts';
import * as m023 from './023_submit_text.ts';
import * as m024 from './024_pg_submit_media.ts';

interface Migration {
  up(db: Knex): Promise<void>;
}

const migrations: Array<[string, Migration]> = [
  ['001_accounts_keys', m001],
  ['002_ledger', m002],
  ['003_assets_voices', m003],
  ['004_idempotency', m004],
  ['005_tasks', m005],
  ['006_balances', m006],
  ['007_policies', m007],
  ['008_job_attempts', m008],
  ['009_remote_calls', m009],
  ['010_signing_keys', m010],
  ['011_hold_guard', m011],
  ['012_blob_pins', m012],
  ['013_console_logins', m013],
  ['014_key_last_used', m014],
  ['015_console_known_addresses', m015],
  ['016_account_days', m016],
  ['017_fair_share', m017],
  ['018_upstream_breakers', m018],
  ['019_job_store_retries', m019],
  ['020_sqlite_guards', m020],
  ['021_submit_media', m021],
  ['022_settle_completion', m022],
  ['023_submit_text', m023],
  ['024_pg_submit_media', m024],
];

export const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    return migrations.map(([name]) => name);
  },
  getMigrationName(name) {
    return name;
  },
  async getMigration(name) {
    const found = migrations.find(([n]) => n === name);
    if (!found) throw new Error(`unknown migration ${name}`);
    return {
      up: found[1].up,
      down: async () => {
        throw new Error('migrations are forward-only');
      },
    };
  },
};
