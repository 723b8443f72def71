/** GET and HEAD /api/generate/tasks/{id}: read-only task snapshots with fresh signed URLs. */
import { Router } from 'express';
import type { operations } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../http/context.ts';
import { checkOwnedTask, viewOwnedTask } from '../domain/task-view.ts';
import { baseUrlFor } from '../http/base-url.ts';

type GetTask = operations['getTask']['responses'][200]['content']['application/json'];
const PATH = '/api/generate/tasks/:id';

export function tasksRouter({ db, clock, config, signer }: Pick<AppDeps, 'db' | 'clock' | 'config' | 'signer'>): Router {
  const baseUrl = baseUrlFor(config);
  const router = Router();
  // HEAD before GET: Express's automatic HEAD-from-GET would be response-validated as a GET.
  router.head(PATH, async (req, res) => {
    await checkOwnedTask(db, principalOf(req).account.id, req.params.id);
    res.status(200).end();
  });
  router.get(PATH, async (req, res) => {
    const task = await viewOwnedTask(db, clock, signer, baseUrl(req), principalOf(req).account.id, req.params.id);
    const body: GetTask = { task };
    res.status(200).json(body);
  });
  return router;
}
