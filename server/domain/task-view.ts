/**
 * The task as the contract shows it (GET /tasks/{id} and submission answers),
 * read in one statement (storage/tasks.ts `findTaskSnapshot`) with freshly
 * signed output URLs. Pure read: it never progresses generation, settles
 * billing or repairs anything.
 */
import type { components } from '../../generated/api.ts';
import { ApiError } from '../errors.ts';
import type { Db } from '../storage/db.ts';
import { findTaskOwner, findTaskSnapshot, listTaskIds, type TaskRow, type TaskSnapshot } from '../storage/tasks.ts';
import type { Clock } from './clock.ts';
import type { UrlSigner } from './signing.ts';

export type TaskView = components['schemas']['Task'];

const notFound = (id: string) => new ApiError(404, 'NOT_FOUND', `No task with id ${id}.`);

function present({ task, reservation, outputs }: TaskSnapshot, clock: Clock, signer: UrlSigner, baseUrl: string): TaskView {
  const now = clock.now();
  return {
    id: task.id,
    status: task.status,
    quotedGems: reservation?.hold ?? 0,
    chargedGems: reservation?.charged ?? 0,
    releasedGems: reservation?.released ?? 0,
    error: task.error_code ? { code: task.error_code, message: task.error_message ?? '' } : null,
    outputs: outputs.map((o) => {
      const asset = o.status === 'succeeded' && o.asset && !o.asset.deleted_at ? o.asset : undefined;
      return {
        index: o.idx,
        status: o.status,
        asset: asset ? { id: asset.id, kind: asset.kind as NonNullable<TaskView['outputs'][number]['asset']>['kind'], mimeType: asset.mime_type, url: signer.sign(baseUrl, asset.id, now) } : null,
      };
    }),
    kind: task.kind,
    model: task.model,
    createdAt: task.created_at,
    updatedAt: task.updated_at,
  };
}

/** Nothing when the task exists and is the account's (HEAD), else 404 NOT_FOUND (unknown, deleted, another account's). */
export async function checkOwnedTask(db: Db, accountId: string, id: string): Promise<void> {
  if ((await findTaskOwner(db, id)) !== accountId) throw notFound(id);
}

/** An owned task's view, or 404 NOT_FOUND (unknown, deleted, another account's). */
export async function viewOwnedTask(db: Db, clock: Clock, signer: UrlSigner, baseUrl: string, accountId: string, id: string): Promise<TaskView> {
  const snapshot = await findTaskSnapshot(db, id);
  if (!snapshot || snapshot.task.account_id !== accountId) throw notFound(id);
  return present(snapshot, clock, signer, baseUrl);
}

/**
 * A submission's answer. A new submission answers from what its transaction
 * wrote (`written`: queued, the quote held, every output pending), with no read:
 * it shows the task as committed even when a worker has claimed it since. A
 * replay reads the task's outputs and reservation now, its own fields from the
 * row handed in.
 */
export async function viewTask(db: Db, clock: Clock, signer: UrlSigner, baseUrl: string, task: TaskRow, written?: TaskSnapshot): Promise<TaskView> {
  if (written) return present(written, clock, signer, baseUrl);
  const snapshot = await findTaskSnapshot(db, task.id);
  if (!snapshot) throw notFound(task.id);
  return present({ ...snapshot, task }, clock, signer, baseUrl);
}

/** A page of an account's tasks, newest first: `cursor` continues where the last page ended; `next` is absent after the last. */
export async function listOwnedTasks(
  db: Db,
  clock: Clock,
  signer: UrlSigner,
  baseUrl: string,
  accountId: string,
  page: { cursor?: string | undefined; limit: number },
): Promise<{ tasks: TaskView[]; next: string | null }> {
  const before = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await listTaskIds(db, accountId, before, page.limit + 1);
  const shown = rows.slice(0, page.limit);
  const tasks = await Promise.all(shown.map((r) => viewOwnedTask(db, clock, signer, baseUrl, accountId, r.id)));
  const last = shown.at(-1);
  return { tasks, next: rows.length > page.limit && last ? Buffer.from(`${last.created_at}|${last.id}`).toString('base64url') : null };
}

function decodeCursor(cursor: string): { createdAt: string; id: string } {
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (!createdAt || !id || Number.isNaN(Date.parse(createdAt))) throw new ApiError(422, 'INVALID_REQUEST', 'The cursor is not one this server gave; start from the first page.');
  return { createdAt, id };
}
