import type { Knex } from 'knex';

/**
 * Fair share of the media workers between accounts, and admission limits.
 *
 * - `jobs.account_id`: the task's account, copied onto its job so a claim finds
 *   one account's oldest due job by an index (account, lane, state, run_at, id)
 *   and counts its running jobs by the same index.
 * - `queue_turns`: one row per (lane, account) that has queued jobs, ordered by
 *   `turn` (the least recently served first), with `queued`, how many. A claim
 *   takes the first account under its running cap with a due job, moves it to
 *   the back (a new `turn`), and removes its row once `queued` is 0. Triggers on
 *   `jobs` keep `queued` (and make the row) whenever a job enters or leaves
 *   `queued` (inserted, claimed, handed back, settled), so no write path, nor a
 *   row inserted by hand, can leave a queued job without its account's turn, and
 *   admission reads an account's queued tasks from two rows instead of counting
 *   its backlog. The trigger also fills `jobs.account_id` from the task when a
 *   writer leaves it out.
 * - `accounts.local_concurrency` / `remote_concurrency` / `queued_tasks`: an
 *   operator's per-account overrides of the configured caps (null: the default).
 * - `rate_buckets`: token buckets of request admission (per key and per account,
 *   text and media apart), in the database so every API instance shares them.
 */
export async function up(db: Knex): Promise<void> {
  const sqlite = (db.client as { dialect?: string }).dialect === 'sqlite3';
  await db.schema.alterTable('jobs', (t) => {
    t.string('account_id', 64);
    t.index(['account_id', 'lane', 'state', 'run_at', 'id'], 'jobs_account_lane_state_run');
  });
  await db.raw('UPDATE jobs SET account_id = (SELECT tasks.account_id FROM tasks WHERE tasks.id = jobs.task_id)');
  await db.schema.createTable('queue_turns', (t) => {
    t.string('lane', 16).notNullable();
    t.string('account_id', 64).notNullable();
    t.bigInteger('turn').notNullable();
    t.integer('queued').notNullable();
    t.primary(['lane', 'account_id']);
    t.index(['lane', 'turn', 'account_id'], 'queue_turns_order');
  });
  await db.raw(
    `INSERT INTO queue_turns (lane, account_id, turn, queued) SELECT lane, account_id, 0, COUNT(*) FROM jobs WHERE state = 'queued' AND account_id IS NOT NULL GROUP BY lane, account_id`,
  );
  await db.schema.alterTable('accounts', (t) => {
    t.integer('local_concurrency');
    t.integer('remote_concurrency');
    t.integer('queued_tasks');
  });
  await db.schema.createTable('rate_buckets', (t) => {
    t.string('id', 160).primary(); // scope:id:kind, e.g. key:key_123:media
    t.double('tokens').notNullable();
    t.bigInteger('at_ms').notNullable(); // when `tokens` was last computed (the API's clock)
    t.double('rate').notNullable(); // tokens per second, as last configured
    t.double('burst').notNullable(); // the most it holds
  });
  // A job entered `queued`: its account's row counts one more (made at the back of the lane's round when new).
  const nextTurn = `COALESCE((SELECT MAX(turn) FROM queue_turns WHERE lane = NEW.lane), 0) + 1`;
  const enter = (account: string) =>
    `INSERT INTO queue_turns (lane, account_id, turn, queued) VALUES (NEW.lane, ${account}, ${nextTurn}, 1) ON CONFLICT (lane, account_id) DO UPDATE SET queued = queue_turns.queued + 1;`;
  // A job left `queued` (claimed, settled, deleted): one fewer. The claim removes the row at 0.
  const leave = `UPDATE queue_turns SET queued = queued - 1 WHERE lane = OLD.lane AND account_id = OLD.account_id;`;
  if (sqlite) {
    await db.raw(`CREATE TRIGGER jobs_fill_account AFTER INSERT ON jobs WHEN NEW.account_id IS NULL BEGIN
      UPDATE jobs SET account_id = (SELECT account_id FROM tasks WHERE id = NEW.task_id) WHERE id = NEW.id;
    END`);
    const account = `COALESCE(NEW.account_id, (SELECT account_id FROM tasks WHERE id = NEW.task_id))`;
    await db.raw(`CREATE TRIGGER jobs_queued_insert AFTER INSERT ON jobs WHEN NEW.state = 'queued' BEGIN ${enter(account)} END`);
    await db.raw(
      `CREATE TRIGGER jobs_queued_enter AFTER UPDATE OF state ON jobs WHEN NEW.state = 'queued' AND OLD.state <> 'queued' BEGIN ${enter('NEW.account_id')} END`,
    );
    await db.raw(`CREATE TRIGGER jobs_queued_leave AFTER UPDATE OF state ON jobs WHEN OLD.state = 'queued' AND NEW.state <> 'queued' BEGIN ${leave} END`);
    await db.raw(`CREATE TRIGGER jobs_queued_delete AFTER DELETE ON jobs WHEN OLD.state = 'queued' BEGIN ${leave} END`);
    return;
  }
  // Postgres: the insert's DO UPDATE takes the turn row's lock, so a claim that is
  // removing that row (its last queued job taken) finishes first and the insert
  // then makes it again: a new job cannot be left without its turn.
  await db.raw(`
    CREATE OR REPLACE FUNCTION gemforge_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        IF OLD.state = 'queued' THEN ${leave} END IF;
        RETURN OLD;
      END IF;
      IF NEW.account_id IS NULL THEN
        SELECT account_id INTO NEW.account_id FROM tasks WHERE id = NEW.task_id;
      END IF;
      IF NEW.state = 'queued' AND (TG_OP = 'INSERT' OR OLD.state <> 'queued') THEN
        ${enter('NEW.account_id')}
      ELSIF TG_OP = 'UPDATE' AND OLD.state = 'queued' AND NEW.state <> 'queued' THEN
        ${leave}
      END IF;
      RETURN NEW;
    END
    $$`);
  await db.raw(`CREATE TRIGGER jobs_turn BEFORE INSERT OR UPDATE OF state OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION gemforge_job_turn()`);
}
