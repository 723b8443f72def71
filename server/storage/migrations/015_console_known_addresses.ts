import type { Knex } from 'knex';

/**
 * The networks each console login has signed in from (an IPv4 address, or an
 * IPv6 /64), so a holder signing in from one of them is not locked out by
 * failures from elsewhere: the per-email and per-address sign-in limits do not
 * apply there, a limit of that pair's own does (docs/console.md).
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('console_known_addresses', (t) => {
    t.string('login_id', 64).notNullable().references('id').inTable('console_logins');
    t.string('network', 64).notNullable(); // "4:192.0.2.7/32" or "6:2001:db8:1:2::/64"
    t.string('signed_in_at', 32).notNullable(); // the last successful sign-in from it
    t.primary(['login_id', 'network']);
  });
}
