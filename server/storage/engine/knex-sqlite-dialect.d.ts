/** knex's own SQLite client class (knex ships no types for its dialect modules); db.ts extends it. */
declare module 'knex/lib/dialects/sqlite3/index.js' {
  import type { Knex } from 'knex';
  export default class SqliteDialect extends Knex.Client {
    queryCompiler(builder: Knex.QueryBuilder, formatter?: unknown): unknown;
  }
}
