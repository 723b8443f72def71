import type { Knex } from 'knex';

/**
 * Reference media assets (uploads and, later, task outputs) and voices (public
 * catalog voices and private uploaded reference voices). Bytes live in the
 * content-addressed blob store under DATA_DIR/blobs; rows point at them by SHA-256.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('assets', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).notNullable().references('accounts.id');
    t.string('kind', 8).notNullable(); // image | video | audio
    t.string('mime_type', 64).notNullable();
    t.string('state', 16).notNullable(); // processing | ready | failed
    t.bigInteger('size_bytes').notNullable();
    t.string('blob_sha256', 64).notNullable();
    t.string('filename', 255); // metadata only, never a path
    t.integer('width');
    t.integer('height');
    t.double('duration_seconds');
    t.string('video_codec', 32);
    t.string('audio_codec', 32);
    t.boolean('has_audio');
    t.string('origin', 8).notNullable(); // upload | output
    t.string('task_id', 64);
    t.string('expires_at', 32); // output retention
    t.string('deleted_at', 32);
    t.string('created_at', 32).notNullable();
    t.index(['account_id', 'created_at']);
    t.index(['task_id']);
    t.index(['blob_sha256']);
  });
  await db.schema.createTable('voices', (t) => {
    t.string('id', 64).primary();
    t.string('account_id', 64).references('accounts.id'); // null for catalog voices
    t.string('name', 200).notNullable();
    t.string('language', 35);
    t.string('visibility', 8).notNullable(); // private | public
    t.string('state', 16).notNullable(); // ready | retired
    t.string('source', 8).notNullable(); // upload | catalog
    t.string('blob_sha256', 64);
    t.double('duration_seconds');
    t.text('transcript');
    t.text('traits').notNullable(); // JSON
    t.string('created_at', 32).notNullable();
    t.index(['account_id', 'visibility', 'state']);
    t.index(['visibility', 'state', 'name']);
  });
}
