/**
 * The task as the contract shows it (GET /tasks/{id} and submission answers),
 * read in one statement (storage/tasks.ts `findTaskSnapshot`) with freshly
 * signed output URLs. Pure read: it never progresses generation, settles
 * billing or repairs anything.
 */
import type { components } from '../../generated/api.ts';
import { DomainError } from './errors.ts';
import type { Db } from '../storage/db.ts';
import { findTaskOwner, findTaskSnapshot, listTaskIds, type TaskRow, type TaskSnapshot } from '../storage/tasks.ts';
import type { Clock } from './clock.ts';
import type { UrlSigner } from './signing.ts';
import { decodeCursor, pageOf } from './paging.ts';

export type TaskView = components['schemas']['Task'];

const notFound = (id: string) => new DomainError('NOT_FOUND', `No task with id ${id}.`);

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
        asset: asset
          ? {
              id: asset.id,
              kind: asset.kind as NonNullable<TaskView['outputs'][number]['asset']>['kind'],
              mimeType: asset.mime_type,
              url: signer.sign(baseUrl, asset.id, now),
            }
          : null,
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

/** How much of a prompt the console's task list carries. */
export const PROMPT_SHOWN_CHARS = 300;

/** The start of the prompt a task was submitted with (its stored request), cut at PROMPT_SHOWN_CHARS with an ellipsis. */
function promptOf(request: string): string {
  let prompt: unknown;
  try {
    prompt = (JSON.parse(request) as { prompt?: unknown }).prompt;
  } catch {
    return '';
  }
  if (typeof prompt !== 'string') return '';
  const chars = Array.from(prompt);
  return chars.length <= PROMPT_SHOWN_CHARS ? prompt : `${chars.slice(0, PROMPT_SHOWN_CHARS - 1).join('')}…`;
}

/**
 * A page of an account's tasks, newest first, each with the key that submitted
 * it and the start of its prompt (the console's list): `cursor` continues where
 * the last page ended; `next` is null after the last.
 */
export async function listOwnedTasks(
  db: Db,
  clock: Clock,
  signer: UrlSigner,
  baseUrl: string,
  accountId: string,
  page: { cursor?: string | undefined; limit: number },
): Promise<{ tasks: Array<TaskView & { keyId: string; prompt: string }>; next: string | null }> {
  const { rows, next } = pageOf(await listTaskIds(db, accountId, decodeCursor(page.cursor), page.limit + 1), page.limit);
  const tasks = await Promise.all(
    rows.map(async (r) => {
      const snapshot = await findTaskSnapshot(db, r.id);
      if (!snapshot || snapshot.task.account_id !== accountId) throw notFound(r.id);
      return { ...present(snapshot, clock, signer, baseUrl), keyId: r.key_id, prompt: promptOf(r.request) };
    }),
  );
  return { tasks, next };
}
