/** Task and task-output rows. */
import { columnsOf, query, rowOf, rowParams, statement, type Conn } from './engine/query.ts';
import { newestFirst, pageParams, pageShape, type PagePosition } from './paging.ts';

export type TaskStatus = 'queued' | 'processing' | 'succeeded' | 'partial' | 'failed' | 'cancelled';
export type OutputStatus = 'pending' | 'processing' | 'succeeded' | 'failed' | 'expired';
export const TERMINAL: ReadonlySet<TaskStatus> = new Set(['succeeded', 'partial', 'failed', 'cancelled']);

export interface TaskRow {
  id: string;
  account_id: string;
  key_id: string;
  kind: 'image' | 'video' | 'audio';
  model: string;
  request: string;
  status: TaskStatus;
  reservation_id: string;
  error_code: string | null;
  error_message: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface OutputRow {
  task_id: string;
  idx: number;
  status: OutputStatus;
  price: number;
  asset_id: string | null;
  error: string | null;
}

const TASK_COLUMNS = [
  'id',
  'account_id',
  'key_id',
  'kind',
  'model',
  'request',
  'status',
  'reservation_id',
  'error_code',
  'error_message',
  'created_at',
  'updated_at',
  'finished_at',
] as const satisfies ReadonlyArray<keyof TaskRow>;
const OUTPUT_COLUMNS = ['task_id', 'idx', 'status', 'price', 'asset_id', 'error'] as const satisfies ReadonlyArray<keyof OutputRow>;

const taskInsert = statement.later('task-insert', (c, ...v) => c('tasks').insert(rowOf(TASK_COLUMNS, v)));
/** The outputs of a task in one INSERT: one statement per number of outputs. */
const outputsInsert = (count: number) =>
  statement.later(`task-outputs-insert:${count}`, (c, ...v) =>
    c('task_outputs').insert(Array.from({ length: count }, (_, i) => rowOf(OUTPUT_COLUMNS, v, i * OUTPUT_COLUMNS.length))),
  );

export async function insertTask(db: Conn, task: TaskRow, outputs: OutputRow[]): Promise<void> {
  await query(db, taskInsert, rowParams(TASK_COLUMNS, task));
  if (!outputs.length) return;
  await query(
    db,
    outputsInsert(outputs.length),
    outputs.flatMap((o) => rowParams(OUTPUT_COLUMNS, o)),
  );
}

const taskById = statement.first<TaskRow>('task-by-id', (c, id) => c('tasks').where({ id }).first());

export async function findTask(db: Conn, id: string): Promise<TaskRow | undefined> {
  return query(db, taskById, [id]);
}

/** The task columns a read shows (not the stored request, which can run to kilobytes). */
const SNAPSHOT_COLUMNS = ['id', 'account_id', 'kind', 'model', 'status', 'error_code', 'error_message', 'created_at', 'updated_at'] as const;

/** What a task read shows: the task, its reservation's amounts, each output with its asset. */
export interface TaskSnapshot {
  task: Pick<TaskRow, (typeof SNAPSHOT_COLUMNS)[number]>;
  reservation: { hold: number; charged: number; released: number } | undefined;
  outputs: Array<{
    idx: number;
    status: OutputStatus;
    asset: { id: string; kind: string; mime_type: string; deleted_at: string | null } | undefined;
  }>;
}

/** Tasks with their reservations, outputs and assets; read by the task's `t.id`. */
const taskSnapshot = statement.byKey('task-snapshot', 't.id', (c) =>
  c('tasks as t')
    .leftJoin('reservations as r', 'r.id', 't.reservation_id')
    .leftJoin('task_outputs as o', 'o.task_id', 't.id')
    .leftJoin('assets as a', 'a.id', 'o.asset_id')
    .orderBy('o.idx')
    .select(
      ...SNAPSHOT_COLUMNS.map((c) => `t.${c}`),
      'r.id as r_id',
      'r.hold_allowance as r_hold_allowance',
      'r.hold_paid as r_hold_paid',
      'r.charged as r_charged',
      'r.released as r_released',
      'o.idx as o_idx',
      'o.status as o_status',
      'a.id as a_id',
      'a.kind as a_kind',
      'a.mime_type as a_mime_type',
      'a.deleted_at as a_deleted_at',
    ),
);

/**
 * A task with its reservation, outputs and their assets in one statement (one
 * row per output, ordered by index; one row with empty output columns when it
 * has none). Task reads used to be one round trip per table and per output.
 */
export async function findTaskSnapshot(db: Conn, id: string): Promise<TaskSnapshot | undefined> {
  const rows = await query(db, taskSnapshot, [id]);
  if (rows.length === 0) return undefined;
  const first = rows[0];
  return {
    task: Object.fromEntries(SNAPSHOT_COLUMNS.map((c) => [c, first[c]])) as TaskSnapshot['task'],
    reservation:
      first.r_id === null
        ? undefined
        : { hold: Number(first.r_hold_allowance) + Number(first.r_hold_paid), charged: Number(first.r_charged), released: Number(first.r_released) },
    outputs: rows
      .filter((r) => r.o_idx !== null)
      .map((r) => ({
        idx: Number(r.o_idx),
        status: r.o_status as OutputStatus,
        asset:
          r.a_id === null
            ? undefined
            : { id: String(r.a_id), kind: String(r.a_kind), mime_type: String(r.a_mime_type), deleted_at: (r.a_deleted_at as string | null) ?? null },
      })),
  };
}

const taskOwner = statement.byKey('task-owner', 'id', (c) => c('tasks').select('account_id'));

/** The account a task belongs to (HEAD /tasks/{id}); undefined for an unknown task. */
export async function findTaskOwner(db: Conn, id: string): Promise<string | undefined> {
  const [row] = await query(db, taskOwner, [id]);
  return row ? String(row.account_id) : undefined;
}

const outputsOf = statement.rows<OutputRow>('task-outputs', (c, taskId) => c('task_outputs').where({ task_id: taskId }).orderBy('idx'));

export async function findOutputs(db: Conn, taskId: string): Promise<OutputRow[]> {
  const rows = await query(db, outputsOf, [taskId]);
  return rows.map((r) => ({ ...r, price: Number(r.price) }));
}

export async function updateTask(db: Conn, id: string, patch: Partial<TaskRow>): Promise<void> {
  const columns = columnsOf(patch);
  await query(
    db,
    statement.write(`task-update:${columns}`, (c, i, ...v) => c('tasks').where({ id: i }).update(rowOf(columns, v))),
    [id, ...rowParams(columns, patch)],
  );
}

/** Moves a task from one of `from` to a new status; false when it was elsewhere. */
export async function transitionTask(db: Conn, id: string, from: TaskStatus[], patch: Partial<TaskRow>): Promise<boolean> {
  const columns = columnsOf(patch);
  const n = from.length;
  const transition = statement.write(`task-transition:${n}:${columns}`, (c, i, ...v) =>
    c('tasks')
      .where({ id: i })
      .whereIn('status', v.slice(0, n))
      .update(rowOf(columns, v, n)),
  );
  return (await query(db, transition, [id, ...from, ...rowParams(columns, patch)])).changes === 1;
}

export async function updateOutput(db: Conn, taskId: string, idx: number, patch: Partial<OutputRow>): Promise<void> {
  const columns = columnsOf(patch);
  const update = statement.write(`task-output-update:${columns}`, (c, t, i, ...v) => c('task_outputs').where({ task_id: t, idx: i }).update(rowOf(columns, v)));
  await query(db, update, [taskId, idx, ...rowParams(columns, patch)]);
}

export async function updateUnfinishedOutputs(db: Conn, taskId: string, patch: Partial<OutputRow>): Promise<void> {
  const columns = columnsOf(patch);
  const update = statement.write(`task-unfinished-outputs-update:${columns}`, (c, t, ...v) =>
    c('task_outputs').where({ task_id: t }).whereIn('status', ['pending', 'processing']).update(rowOf(columns, v)),
  );
  await query(db, update, [taskId, ...rowParams(columns, patch)]);
}

/** Outputs whose stored asset has passed its retention time (one statement per `limit`). */
const expired = (limit: number) =>
  statement.rows<OutputRow & { blob_sha256: string }>(`expired-outputs:${limit}`, (c, now) =>
    c('task_outputs as o')
      .join('assets as a', 'a.id', 'o.asset_id')
      .where('o.status', 'succeeded')
      .whereNull('a.deleted_at')
      .whereNotNull('a.expires_at')
      .where('a.expires_at', '<=', now)
      .select('o.*', 'a.blob_sha256')
      .limit(limit),
  );

/** Outputs whose stored asset has passed its retention time. */
export async function expiredOutputs(db: Conn, nowIso: string, limit: number): Promise<Array<OutputRow & { blob_sha256: string }>> {
  return query(db, expired(limit), [nowIso]);
}

const withMoney = statement.rows<TaskRow & { hold: unknown; charged: unknown; released: unknown; rstate: unknown }>('tasks-with-money', (c) =>
  c('tasks as t')
    .join('reservations as r', 'r.id', 't.reservation_id')
    .select('t.*', c.raw('(r.hold_allowance + r.hold_paid) as hold'), 'r.charged', 'r.released', 'r.state as rstate'),
);

/** Terminal tasks with their reservation amounts (for ledger verify). */
export async function tasksWithMoney(db: Conn): Promise<Array<TaskRow & { hold: number; charged: number; released: number; rstate: string }>> {
  const rows = await query(db, withMoney);
  return rows.map((r) => ({ ...r, hold: Number(r.hold), charged: Number(r.charged), released: Number(r.released), rstate: String(r.rstate) }));
}

const outputPrices = statement.first<{ total: number | string | null }>('task-output-prices', (c, taskId) =>
  c('task_outputs').where({ task_id: taskId }).sum({ total: 'price' }).first(),
);

export async function sumOutputPrices(db: Conn, taskId: string): Promise<number> {
  const row = await query(db, outputPrices, [taskId]);
  return Number(row?.total ?? 0);
}

/** An account's tasks, newest first, after `before` when given: their ids, and the key and request each was submitted with. */
export async function listTaskIds(
  db: Conn,
  accountId: string,
  before: PagePosition | undefined,
  limit: number,
): Promise<Array<Pick<TaskRow, 'id' | 'created_at' | 'key_id' | 'request'>>> {
  const page = statement.rows<Pick<TaskRow, 'id' | 'created_at' | 'key_id' | 'request'>>(pageShape('task-ids', before, limit), (c, account, ...position) =>
    newestFirst(c('tasks').where({ account_id: account }).select('id', 'created_at', 'key_id', 'request'), position, limit),
  );
  return query(db, page, [accountId, ...pageParams(before)]);
}
